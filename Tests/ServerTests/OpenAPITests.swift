import EventStore
import Foundation
import Hummingbird
import HummingbirdTesting
import Postgres
import Server
import ServerTestSupport
import Testing
import TestSupport
@testable import UseCases

@Suite("OpenAPI document")
struct OpenAPITests {
    static var repositoryDocument: [String: Any] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/Server/Resources/openapi.json")
        let data = (try? Data(contentsOf: url)) ?? Data()
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }

    /// Every `METHOD /path` the document describes (the router writes parameters as `{name}` too).
    var documented: Set<String> {
        let paths = Self.repositoryDocument["paths"] as? [String: [String: Any]] ?? [:]
        return Set(paths.flatMap { path, operations in operations.keys.map { "\($0.uppercased()) \(path)" } })
    }

    @Test func theDocumentDescribesExactlyTheRoutesTheServerHas() async throws {
        #expect(Self.repositoryDocument["openapi"] as? String == "3.1.0")
        let pool = PostgresPool(
            configuration: try PostgresConfiguration("postgresql://nobody@127.0.0.1:1/none"), logger: TestDatabase.logger)
        let gateway = CommandGateway(store: EventStore(pool: pool, logger: TestDatabase.logger), logger: TestDatabase.logger)
        let router = buildRouter(
            readiness: Readiness(pool: pool, migrator: Migrator(migrations: [], logger: TestDatabase.logger)),
            accounts: Accounts(pool: pool, gateway: gateway, bcryptCost: 4), payments: try .sandbox(secret: testCardSecret))
        // The desk's pages are HTML for a browser, not the API: DeskTests hold them.
        let served = Set(router.routes.map { "\($0.method.rawValue) \($0.path)" }.filter { !$0.contains(" /desk") })
        await pool.shutdown()
        #expect(served.subtracting(documented).isEmpty, "routes the document lacks: \(served.subtracting(documented).sorted())")
        #expect(documented.subtracting(served).isEmpty, "documented routes the server lacks: \(documented.subtracting(served).sorted())")
        #expect(served.count > 20)
    }

    /// Generated clients name their methods after `operationId` and group them by tag: each
    /// operation has one, camelCase, unique, and one tag the document declares.
    @Test func everyOperationHasAUniqueCamelCaseIdAndADeclaredTag() {
        let paths = Self.repositoryDocument["paths"] as? [String: [String: Any]] ?? [:]
        let declaredTags = Set(((Self.repositoryDocument["tags"] as? [[String: Any]]) ?? []).compactMap { $0["name"] as? String })
        var ids: [String: String] = [:]
        for (path, operations) in paths {
            for (method, operation) in operations {
                let route = "\(method.uppercased()) \(path)"
                let operation = operation as? [String: Any] ?? [:]
                guard let id = operation["operationId"] as? String else {
                    Issue.record("\(route) has no operationId")
                    continue
                }
                #expect(id.wholeMatch(of: /[a-z]+([A-Z][a-z0-9]*|API)*/) != nil, "\(route): \(id) is not camelCase")
                #expect(ids.updateValue(route, forKey: id) == nil, "\(id) names both \(route) and \(ids[id] ?? "")")
                let tags = operation["tags"] as? [String] ?? []
                #expect(tags.count == 1 && declaredTags.contains(tags[0]), "\(route): tags \(tags)")
            }
        }
        #expect(ids.count == documented.count)
        #expect(ids["placeBid"] == "POST /v1/items/{itemID}/bids")
    }

    @Test func theServerServesTheRepositoryDocument() async throws {
        try await withServer { client, _ in
            let response = try await client.send(.get, "/openapi.json")
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "application/json")
            // The whole document, compared as JSON: no Swift type holds it.
            #expect(NSDictionary(dictionary: response.json).isEqual(to: Self.repositoryDocument))
        }
    }
}
