import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import HummingbirdTesting
import ImageFixtures
import Marketplace
import Media
import Projections
@testable import Server
import ServerTestSupport
import Testing
import TestSupport
import UseCases

/// What one client may cost the server in photos (issue 48): storage, uploads, connections.
@Suite("Media limits")
struct MediaLimitsTests {
    @Test func aLargeImageIsSentAChunkAtATimeIntactAndCachedForADay() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let item = try await client.postRental(owner.token).id
            // Noise: a JPEG of more than one chunk.
            let added = try await client.upload(
                "/v1/items/\(item)/photos", try Fixture.stripedNoise(width: 2400, height: 1600), type: "image/png", token: owner.token)
            #expect(added.status == .created, "\(added)")
            let digest = try #require(try added.decode(ItemResource.self).photos.first?.digest)
            let full = try await client.media("/v1/media/\(digest)")
            #expect(full.status == .ok)
            #expect(full.data.count > PhotoLibrary.chunkBytes, "more than one chunk: \(full.data.count) bytes")
            #expect(full.headers[.contentLength] == "\(full.data.count)")
            // The digest names the full variant's bytes: every chunk is there, in order.
            #expect(SHA256.hash(data: full.data).map { String(format: "%02x", $0) }.joined() == digest)
            #expect(full.headers[.cacheControl] == "public, max-age=86400", "a removed photo leaves caches within a day")
        }
    }

    @Test func photosCountAgainstTheirUploadersQuota() async throws {
        try await withServer(media: MediaSettings(worker: testImageWorker, quotaBytes: 300_000)) { client, admin in
            let owner = try await client.user("owner")
            let other = try await client.user("other")
            let item = try await client.postRental(owner.token).id
            var stored = [String]()
            var refused: Reply?
            for index in 0..<20 {
                let photo = try Fixture.image(width: 900 + index, height: 700, as: ".jpg")
                let reply = try await client.upload("/v1/items/\(item)/photos", photo, type: "image/jpeg", token: owner.token)
                if reply.status != .created {
                    refused = reply
                    break
                }
                stored = try reply.decode(ItemResource.self).photos.map(\.digest)
            }
            let full = try #require(refused, "the quota was never reached")
            #expect(full.status == .conflict && full.code == "storage_quota_exceeded", "\(full)")
            #expect(!stored.isEmpty)
            let used = try await count(admin, "SELECT coalesce(sum(size), 0)::int FROM media WHERE owner_id = \(owner.id.rawValue)")
            #expect(used <= 300_000, "nothing stored past the quota: \(used)")
            // Someone else's quota is their own.
            let theirs = try await client.postRental(other.token).id
            let fine = try await client.upload(
                "/v1/items/\(theirs)/photos", try Fixture.image(width: 640, height: 480, as: ".jpg"), type: "image/jpeg", token: other.token)
            #expect(fine.status == .created, "\(fine)")
            // Removing photos (and collecting them) makes room again.
            for digest in stored {
                #expect(try await client.send(.delete, "/v1/items/\(item)/photos/\(digest)", token: owner.token).status == .ok)
            }
            _ = try runLender(["media", "gc", "--older-than", "0"], database: try await ownerURL(admin))
            let again = try await client.upload(
                "/v1/items/\(item)/photos", try Fixture.image(width: 901, height: 700, as: ".jpg"), type: "image/jpeg", token: owner.token)
            #expect(again.status == .created, "\(again)")
        }
    }

    @Test func uploadsHaveABucketOfTheirOwn() async throws {
        let limits = WriteLimits(postingsPerHour: 0, bidsPerHour: 0, changesPerHour: 0, photosPerHour: 4, registrationsPerHour: 0)
        try await withServer(writeLimits: limits) { client, _ in
            let owner = try await client.user("owner")
            let item = try await client.postRental(owner.token).id
            let first = try await client.upload(
                "/v1/items/\(item)/photos", try Fixture.image(width: 64, height: 48, as: ".png"), type: "image/png", token: owner.token)
            #expect(first.status == .created, "\(first)")
            let second = try await client.upload(
                "/v1/items/\(item)/photos", try Fixture.image(width: 65, height: 48, as: ".png"), type: "image/png", token: owner.token)
            #expect(second.status == .tooManyRequests && second.code == "too_many_writes", "\(second)")
            #expect(second.headers[.retryAfter] != nil)
            // Other changes are not held up by it.
            let revised = try await client.send(
                .patch, "/v1/items/\(item)", body: API.RevisionBody(title: "Red road bike"), token: owner.token)
            #expect(revised.status == .ok, "\(revised)")
        }
    }

    @Test func registrationsFromOneAddressAreLimitedBeforeAnythingIsLookedUp() async throws {
        let limits = WriteLimits(postingsPerHour: 0, bidsPerHour: 0, changesPerHour: 0, photosPerHour: 0, registrationsPerHour: 8)
        try await withServer(writeLimits: limits) { client, admin in
            _ = try await client.register("first")
            // Probing whether an address has an account counts too.
            let taken = try await client.send(
                .post, "/v1/users",
                body: API.RegisterBody(handle: "second", displayName: "S", email: "first@example.org", password: "correct horse battery"))
            #expect(taken.status == .conflict && taken.code == "email_taken", "\(taken)")
            let users = try await count(admin, "SELECT count(*)::int FROM credentials")
            let refused = try await client.send(
                .post, "/v1/users",
                body: API.RegisterBody(handle: "third", displayName: "T", email: "third@example.org", password: "correct horse battery"))
            #expect(refused.status == .tooManyRequests && refused.code == "too_many_registrations", "\(refused)")
            #expect(refused.headers[.retryAfter] != nil)
            let probe = try await client.send(
                .post, "/v1/users",
                body: API.RegisterBody(handle: "fourth", displayName: "F", email: "first@example.org", password: "correct horse battery"))
            #expect(probe.status == .tooManyRequests, "an enumeration gets no answer past the limit: \(probe)")
            #expect(try await count(admin, "SELECT count(*)::int FROM credentials") == users)
            // Logging in is not a registration.
            #expect(
                try await client.send(.post, "/v1/sessions", body: API.LoginBody(handle: "first", password: "correct horse battery")).status
                    == .created)
        }
    }

    @Test func theJobsCollectAReplacedPhoto() async throws {
        try await withServer { client, admin in
            let zelda = try await client.user("zelda")
            let first = try await client.upload(
                "/v1/me/photo", try Fixture.image(width: 300, height: 300, as: ".png"), type: "image/png", token: zelda.token, method: .put)
            let old = try #require(try first.decode(PrivateProfile.self).photos.first?.digest)
            let second = try await client.upload(
                "/v1/me/photo", try Fixture.image(width: 301, height: 300, as: ".png"), type: "image/png", token: zelda.token, method: .put)
            let new = try #require(try second.decode(PrivateProfile.self).photos.first?.digest)
            #expect(old != new)
            // Past the grace an upload's event has to arrive in.
            _ = try await admin.query("UPDATE media SET created_at = now() - interval '2 hours'")
            let ran = try runLender(["jobs", "run"], database: try await ownerURL(admin))
            #expect(ran.contains("1 unused photos deleted"), "\(ran)")
            #expect(try await client.media("/v1/media/\(old)").status == .notFound)
            #expect(try await client.media("/v1/media/\(new)").status == .ok)
        }
    }

    /// Issue 48's floods together, on a real server: 10 clients reading a 10 MB image, 10
    /// that ask for it and never read, and 10 registering (the suite runs beside it: the
    /// full-size flood is `scripts/bench flood`). A signed-in user's market reads all
    /// answer (the images have a pool of their own), the memory stays bounded (a chunk and a
    /// socket's buffers per reader, closed after the write timeout), and registrations past
    /// the address's limit are refused. How fast the market read stays is `scripts/bench flood`.
    @Test func floodsOfImageReadersAndRegistrationsLeaveTheMarketAnswering() async throws {
        try await withServerDatabase { database, admin in
            let server = try await ServerProcess(
                database: database, environment: ["HTTP_WRITE_TIMEOUT": "2", "WRITE_LIMIT_REGISTRATIONS_PER_HOUR": "60"])
            defer { server.kill(SIGTERM) }
            let user = try await server.user("reader")
            #expect(try await server.send(.get, "/v1/market", token: user.token).status == .ok)
            let digest = String(repeating: "f", count: 64)
            _ = try await admin.query(
                """
                INSERT INTO media (digest, variant, bytes, width, height)
                VALUES (\(digest), 'full', convert_to(repeat('x', 10000000), 'UTF8'), 4000, 3000)
                """)
            let before = server.residentBytes
            let request = "GET /v1/media/\(digest) HTTP/1.1\r\nHost: localhost\r\n\r\n"
            let silent = try (0..<10).map { _ in try RawConnection(port: server.port) }
            for connection in silent { connection.send(request) }

            let (markets, registrations, reads) = try await withThrowingTaskGroup(of: [Int].self) { group in
                for index in 0..<10 {
                    group.addTask {
                        var statuses = [Int]()
                        for round in 0..<6 {
                            let reply = try await server.send(
                                .post, "/v1/users",
                                body: API.RegisterBody(
                                    handle: "flood_\(index)_\(round)", displayName: "F", email: "f\(index).\(round)@example.org",
                                    password: "correct horse battery"))
                            statuses.append(reply.status.code)
                        }
                        return statuses.map { -$0 }
                    }
                    group.addTask {
                        // The silent ones hold the address's slots until the write timeout
                        // closes them: a reader is told 429 and comes back, as Retry-After says.
                        var statuses = [Int]()
                        for _ in 0..<60 {
                            let reply = try await server.send(.get, "/v1/media/\(digest)")
                            statuses.append(1000 + reply.status.code)
                            if reply.status == .ok {
                                #expect(reply.data.count == 10_000_000)
                                break
                            }
                            try await Task.sleep(for: .seconds(1))
                        }
                        return statuses
                    }
                }
                group.addTask {
                    var statuses = [Int]()
                    for _ in 0..<20 { statuses.append(try await server.send(.get, "/v1/market", token: user.token).status.code) }
                    return statuses.map { 2000 + $0 }
                }
                var all = [Int]()
                for try await part in group { all += part }
                return (
                    all.filter { $0 >= 2000 }.map { $0 - 2000 }, all.filter { $0 < 0 }.map { -$0 },
                    all.filter { (1000..<2000).contains($0) }.map { $0 - 1000 }
                )
            }
            #expect(markets.count == 20 && markets.allSatisfy { $0 == 200 }, "the market answered every read: \(markets)")
            #expect(Set(reads).isSubset(of: [200, 429]) && reads.filter { $0 == 200 }.count == 10, "every reader got the image: \(reads)")
            let created = registrations.filter { $0 == 201 }.count
            #expect(created <= 15 && registrations.filter { $0 == 429 }.count >= 45, "\(created) registered of \(registrations.count)")
            #expect(!registrations.contains(503), "the limit refuses before bcrypt's queue fills")
            // The silent connections were closed once their sockets filled and stayed full.
            let closed = await withTaskGroup(of: Bool.self) { group in
                for connection in silent { group.addTask { await onThread { connection.read(within: .seconds(3)).closed } } }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(closed >= 4, "the readers that never read were closed after the write timeout: \(closed)")
            let grown = server.residentBytes - before
            #expect(grown < 200_000_000, "the server's memory grew by \(grown / 1_000_000) MB")
        }
    }

    @Test func oneAddressGetsAFewImagesAtOnce() throws {
        let streams = MediaStreams(perAddress: 2)
        var first: MediaStreams.Slot? = try streams.admit("192.0.2.1")
        let second = try streams.admit("192.0.2.1")
        #expect(throws: Problem.self) { try streams.admit("192.0.2.1") }
        _ = try streams.admit("198.51.100.7")
        withExtendedLifetime(first) {}
        first = nil
        let third = try streams.admit("192.0.2.1")
        withExtendedLifetime((second, third)) {}
    }
}
