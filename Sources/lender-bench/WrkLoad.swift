import ArgumentParser
import Foundation

/// A scenario's load sent by wrk (Debian's `wrk`), a C client as pgbench is for the
/// baselines: this program's own client spent about a quarter of a core at 1,500 requests/s,
/// taken from the server it measures on the same two cores; wrk spends about a twentieth.
/// A read's requests take the users' tokens in turn; a command's requests are each their own,
/// written by wrk's Lua as lender-bench's client writes them (`Request`).
///
/// wrk's percentiles are the stricter measure: before its `done`, wrk 4 corrects its
/// histogram for coordinated omission (a sample for each interval a slow response held its
/// connection up), where lender-bench's client records each response's own time.
struct WrkLoad {
    /// What each request is.
    enum Request {
        /// The same GET every time.
        case read(path: String)
        /// `POST /v1/rentals`, a new title each time. The bodies are `HTTPBench`'s, as its own client sends them.
        case postRental
        /// `POST /v1/items/{id}/bids` over `items`: each user bids on each item at most once
        /// (one pending bid per item and bidder), walking the items in turn from 7 items after
        /// the user before, so requests in a row go to different items. `items × users` bids
        /// in all (`HTTPBench` warns of a run that could ask for more).
        case placeBid(items: [String], bodies: [String])
        /// A POST with no body to each of `paths` once (approvals), the threads taking them in
        /// turn; past the last, from the first again (those answer 409 and count as failures).
        case postEach(paths: [String])
    }

    var request: Request
    var tokens: [String]
    var port: Int
    var seconds: Double

    /// wrk's threads, each with `connections / threads` of the connections: two, unless that
    /// would leave one out.
    var threads: Int { tokens.count % 2 == 0 ? 2 : 1 }

    var path: String {
        switch request {
        case .read(let path): path
        case .postRental: "/v1/rentals"
        // The request writes its own path; wrk wants one to start with.
        case .placeBid: "/v1/items"
        case .postEach(let paths): paths.first ?? "/"
        }
    }

    /// The status every request of the scenario answers when it succeeds.
    var expectedStatus: Int {
        switch request {
        case .read, .postEach: 200
        case .postRental, .placeBid: 201
        }
    }

    func run(scenario: String) throws -> HTTPFigures {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("lender-bench-wrk-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let script = folder.appendingPathComponent("load.lua")
        // Paths one a line, read by each thread's Lua: tens of thousands of them are more
        // constants than LuaJIT takes in one chunk.
        let pathsFile = folder.appendingPathComponent("paths.txt")
        let paths = if case .postEach(let paths) = request { paths } else { [String]() }
        try paths.joined(separator: "\n").write(to: pathsFile, atomically: true, encoding: .utf8)
        try luaScript(pathsFile: pathsFile.path).write(to: script, atomically: true, encoding: .utf8)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "wrk", "-t", String(threads), "-c", String(tokens.count), "-d", "\(Int(seconds.rounded(.up)))s",
            "--timeout", "10s", "-s", script.path, "http://127.0.0.1:\(port)\(path)",
        ]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0,
            let line = text.split(separator: "\n").last(where: { $0.hasPrefix("{") }),
            let summary = try? JSONDecoder().decode(Summary.self, from: Data(line.utf8))
        else { throw ValidationError("wrk did not run (exit \(process.terminationStatus)): \(text)") }
        // Socket errors are not among wrk's requests; time-outs and other statuses are.
        let failed = summary.timeouts + summary.notOK
        return HTTPFigures(
            scenario: scenario, connections: tokens.count, requests: summary.requests, failures: summary.socketErrors + failed,
            seconds: summary.seconds, throughput: Double(summary.requests - failed) / summary.seconds,
            p50Ms: summary.p50Ms, p90Ms: summary.p90Ms, p99Ms: summary.p99Ms, client: "wrk")
    }

    /// What wrk's `done` writes: counts, and latencies in milliseconds.
    struct Summary: Decodable {
        /// Responses, slow and failed ones included.
        var requests: Int
        /// Connections that failed to open, read or write: no response at all.
        var socketErrors: Int
        var timeouts: Int
        /// Responses whose status was not the scenario's (`expectedStatus`).
        var notOK: Int
        var seconds: Double
        var p50Ms: Double
        var p90Ms: Double
        var p99Ms: Double
    }

    /// `setup` numbers the threads: thread `id` (from 1) sends as the users `id`, `id + threads`, …,
    /// so no two threads send the same (user, item) pair.
    func luaScript(pathsFile: String) -> String {
        let list = tokens.map { "\"Bearer \($0)\"" }.joined(separator: ",")
        let items = if case .placeBid(let items, _) = request { items.map { "\"\($0)\"" }.joined(separator: ",") } else { "" }
        let bodies = if case .placeBid(_, let bodies) = request { bodies.map { "[[\($0)]]" }.joined(separator: ",") } else { "" }
        let next: String
        switch request {
        case .read:
            next = #"""
                return wrk.format("GET", nil, {["Authorization"] = tokens[user]})
                """#
        case .postRental:
            next = #"""
                local body = string.format([[\#(HTTPBench.rentalBody(title: "%s"))]], "Bench " .. id .. "-" .. sent)
                return wrk.format("POST", "/v1/rentals", {["Authorization"] = tokens[user], ["Content-Type"] = "application/json"}, body)
                """#
        case .placeBid:
            next = #"""
                local item = items[(round + 7 * user) % #items + 1]
                return wrk.format("POST", "/v1/items/" .. item .. "/bids", {["Authorization"] = tokens[user], ["Content-Type"] = "application/json"}, bodies[user])
                """#
        case .postEach:
            next = #"""
                return wrk.format("POST", paths[((sent - 1) * \#(threads) + id - 1) % #paths + 1], {["Authorization"] = tokens[user]})
                """#
        }
        return """
            local tokens = {\(list)}
            local items = {\(items)}
            local bodies = {\(bodies)}
            local paths = {}
            for line in io.lines("\(pathsFile)") do table.insert(paths, line) end
            local threads = {}
            local expected = \(expectedStatus)
            local sent = 0
            setup = function(thread)
              table.insert(threads, thread)
              thread:set("id", #threads)
            end
            init = function(args) notOK = 0 end
            request = function()
              local mine = math.floor((#tokens - id) / \(threads)) + 1
              local slot = sent % mine
              local round = math.floor(sent / mine)
              local user = id + slot * \(threads)
              sent = sent + 1
            \(next)
            end
            response = function(status, headers, body)
              if status ~= expected then notOK = notOK + 1 end
            end
            done = function(summary, latency, requests)
              local e, bad = summary.errors, 0
              for _, thread in ipairs(threads) do bad = bad + thread:get("notOK") end
              io.write(string.format('{"requests":%d,"socketErrors":%d,"timeouts":%d,"notOK":%d,"seconds":%.6f,"p50Ms":%.3f,"p90Ms":%.3f,"p99Ms":%.3f}\\n',
                summary.requests, e.connect + e.read + e.write, e.timeout, bad, summary.duration / 1e6,
                latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000))
            end
            """
    }
}
