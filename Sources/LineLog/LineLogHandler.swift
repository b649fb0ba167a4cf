import Logging

/// swift-log's `StreamLogHandler`, with its metadata handed over only when a line is written.
/// Its own setter formats every key at once (`prettify`), and a request sets two (Hummingbird's
/// id and `RequestLogMiddleware`'s) for lines that at the server's level are seldom written:
/// 2–3% of a command's CPU (`perf`), for nothing. The lines are the stream handler's, unchanged.
public struct LineLogHandler: LogHandler {
    private var lines: StreamLogHandler
    public var metadata: Logger.Metadata = [:]

    public init(_ lines: StreamLogHandler) {
        self.lines = lines
        self.metadata = lines.metadata
    }

    public var logLevel: Logger.Level {
        get { lines.logLevel }
        set { lines.logLevel = newValue }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { lines.metadataProvider }
        set { lines.metadataProvider = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var lines = lines
        lines.metadata = metadata
        lines.log(event: event)
    }
}
