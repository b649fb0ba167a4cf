import Foundation


/// `scripts/db` on the clusters under `local` (its `LENDER_LOCAL`): what it printed, and its
/// exit status. The drills' clusters (`ClusterPair`, `BackedUpCluster`, `AutoFailoverCluster`)
/// all run it so, apart from the suite's shared cluster.
public func scriptsDB(_ arguments: [String], local: String) throws -> (output: String, status: Int32) {
    let process = Process()
    process.executableURL = root.appendingPathComponent("scripts/db")
    process.arguments = arguments
    process.environment = [
        "LENDER_LOCAL": local, "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "",
        "HOME": ProcessInfo.processInfo.environment["HOME"] ?? "/tmp",
    ]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    // Not `waitUntilExit`, which spins on Linux.
    while process.isRunning { usleep(20_000) }
    return (String(decoding: data, as: UTF8.self), process.terminationStatus)
}

/// `scripts/db` that failed: its arguments and what it printed.
public struct ScriptsDBError: Error, CustomStringConvertible {
    public var arguments: [String]
    public var output: String
    public var description: String { "scripts/db \(arguments.joined(separator: " ")) failed: \(output)" }
}

/// `scripts/db` that must succeed: what it printed.
@discardableResult
public func scriptsDBChecked(_ arguments: [String], local: String) throws -> String {
    let (output, status) = try scriptsDB(arguments, local: local)
    guard status == 0 else { throw ScriptsDBError(arguments: arguments, output: output) }
    return output
}
