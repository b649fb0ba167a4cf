/// One at a time, across suites: the drills that load both cores (the failover and restore
/// drills' writers) and the tests that count what a loaded machine does in a few seconds (the
/// login limits' bcrypt turns) take turns, so neither measures the other.
public actor QuietMachine {
    public static let shared = QuietMachine()
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    public func run<T: Sendable>(_ body: @Sendable () async throws -> T) async rethrows -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        guard busy else {
            busy = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func release() {
        if waiting.isEmpty { busy = false } else { waiting.removeFirst().resume() }
    }
}
