import Foundation
import HummingbirdTesting
import Projections
import Server
import ServerTestSupport
import Testing
import TestSupport

@Suite("The signed-in user's commands")
struct MeTests {
    @Test func aProfileIsUpdatedWithinTheRules() async throws {
        try await withServer { client, _ in
            let ada = try await client.user("ada")
            let updated = try await client.send(
                .patch, "/v1/me", body: API.ProfileBody(displayName: "Ada L.", country: "NP", defaultShareCents: 5000), token: ada.token)
            #expect(updated.status == .ok)
            let profile = try updated.decode(PrivateProfile.self)
            #expect(profile.displayName == "Ada L.")
            #expect(profile.defaultShareCents == 5000)
            #expect((profile.position ?? 0) > 0)
            let bad = try await client.send(.patch, "/v1/me", body: API.ProfileBody(defaultShareCents: 3000), token: ada.token)
            #expect(bad.status == .unprocessableContent)
            #expect(bad.problem?.errors?.first?.code == "invalid_share")
            #expect(try await client.send(.patch, "/v1/me", body: API.ProfileBody(displayName: "x")).status == .unauthorized)
        }
    }

    @Test func aBlockedUserCannotBidOnTheBlockersItems() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let troll = try await client.user("troll")
            let itemID = try await client.postRental(owner.token).id

            let blocked = try await client.send(.post, "/v1/me/blocks", body: API.BlockBody(userId: troll.id.rawValue), token: owner.token)
            #expect(blocked.status == .ok)
            #expect(try blocked.decode(PrivateProfile.self).blocked == [troll.id])
            let refused = try await client.bid(itemID, troll.token)
            #expect(refused.status == .forbidden)
            #expect(refused.code == "blocked_by_owner")

            let selfBlock = try await client.send(
                .post, "/v1/me/blocks", body: API.BlockBody(userId: owner.id.rawValue), token: owner.token)
            #expect(selfBlock.status == .unprocessableContent)
            #expect(selfBlock.code == "cannot_block_self")
            #expect(selfBlock.fieldCodes["userId"] == "cannot_block_self", "names the field (issue 47)")

            let unblocked = try await client.send(.delete, "/v1/me/blocks/\(troll.id)", token: owner.token)
            #expect(try unblocked.decode(PrivateProfile.self).blocked == [])
            #expect(try await client.bid(itemID, troll.token).status == .created)
        }
    }
}
