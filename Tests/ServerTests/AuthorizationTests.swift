import Foundation
import Hummingbird
import HummingbirdTesting
import Projections
import Server
import ServerTestSupport
import Testing
import TestSupport

@Suite("Authorization matrix")
struct AuthorizationTests {
    @Test func everyMutatingRouteNeedsATokenAndTheRightUser() async throws {
        try await withServer { client, _ in
            let owner = try await client.user("owner")
            let bidder = try await client.user("bidder")
            let other = try await client.user("other")
            let itemID = try await client.postRental(owner.token).id
            let bidID = try await client.bid(itemID, bidder.token).decode(BidResource.self).id

            let mutating: [(HTTPRequest.Method, String)] = [
                (.post, "/v1/rentals"), (.post, "/v1/requests"), (.patch, "/v1/items/\(itemID)"),
                (.post, "/v1/items/\(itemID)/withdraw"), (.post, "/v1/items/\(itemID)/complete"),
                (.post, "/v1/items/\(itemID)/relist"), (.post, "/v1/items/\(itemID)/bids"),
                (.post, "/v1/bids/\(bidID)/approve"), (.post, "/v1/bids/\(bidID)/reject"),
                (.post, "/v1/bids/\(bidID)/withdraw"), (.patch, "/v1/me"), (.post, "/v1/me/blocks"),
                (.delete, "/v1/me/blocks/\(other.id)"), (.delete, "/v1/sessions/current"),
            ]
            for (method, path) in mutating {
                let anonymous = try await client.send(method, path, json: ["title": "x"])
                #expect(anonymous.status == .unauthorized, "\(method) \(path)")
                #expect(anonymous.code == "unauthenticated", "\(method) \(path)")
                let forged = try await client.send(method, path, json: ["title": "x"], token: "forged-token")
                #expect(forged.status == .unauthorized, "\(method) \(path)")
            }

            // The owner's and the bidder's commands, given by someone else.
            let ownersOnly: [(HTTPRequest.Method, String, [String: Any])] = [
                (.patch, "/v1/items/\(itemID)", ["title": "Mine now"]), (.post, "/v1/items/\(itemID)/withdraw", [:]),
                (.post, "/v1/items/\(itemID)/complete", [:]), (.post, "/v1/items/\(itemID)/relist", [:]),
                (.post, "/v1/bids/\(bidID)/approve", [:]), (.post, "/v1/bids/\(bidID)/reject", [:]),
            ]
            for (method, path, body) in ownersOnly {
                let response = try await client.send(method, path, json: body, token: other.token)
                #expect(response.status == .forbidden, "\(method) \(path)")
                #expect(response.code == "not_owner", "\(method) \(path)")
            }
            let notTheBidder = try await client.send(.post, "/v1/bids/\(bidID)/withdraw", token: owner.token)
            #expect(notTheBidder.status == .forbidden)
            #expect(notTheBidder.code == "not_your_bid")

            // Reads need a token too.
            for path in ["/v1/market", "/v1/items/\(itemID)", "/v1/items/\(itemID)/bids", "/v1/me", "/v1/users/\(owner.id)"] {
                #expect(try await client.send(.get, path).status == .unauthorized, "\(path)")
            }
        }
    }
}
