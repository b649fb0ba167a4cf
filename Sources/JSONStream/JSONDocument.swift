/// A JSON text read once onto the tape (`TapeParser`, the events' decoder's): for the readers
/// that walk JSON rather than decode it into a type. A request body's shape check, the
/// idempotency digest's canonical form and the sealing of an event's top-level fields each had
/// a scanner of their own; they now walk this one, so JSON's grammar is read in one place.
///
/// A value is named by its place on the tape (`Int`): `root`, then `members(of:)` and
/// `elements(of:)` down from it.
public struct JSONDocument: Sendable {
    /// Bounds checked as the bytes are read: a body far past one is refused there, not parsed
    /// whole first (a megabyte of tiny values cost the decoder 54 to 130 ms, issue 48).
    public struct Limits: Sendable {
        /// Containers inside containers: the top-level one is 1.
        public var depth: Int
        /// A string's bytes between its quotes, as written (escapes unread).
        public var stringBytes: Int
        /// Members and elements in all, counted by the commas between them.
        public var values: Int

        public init(depth: Int, stringBytes: Int, values: Int) {
            (self.depth, self.stringBytes, self.values) = (depth, stringBytes, values)
        }
    }

    /// Which of `Limits` the text went past.
    public enum LimitExceeded: Error, Sendable {
        case depth, stringBytes, values
    }

    public enum Kind: Sendable {
        case null, bool, number, string, array, object
    }

    public let bytes: [UInt8]
    let tape: [TapeEntry]

    /// The text's one value, read whole; a `DecodingError` for anything that is not JSON as
    /// `JSONDecoder` reads it, `LimitExceeded` first for a text past `limits`.
    public init(_ bytes: [UInt8], limits: Limits? = nil) throws {
        self.bytes = bytes
        tape = try bytes.withUnsafeBufferPointer { buffer in
            var parser = TapeParser(bytes: buffer, limits: limits)
            return try parser.parseDocument()
        }
    }

    public var root: Int { 0 }

    public func kind(_ value: Int) -> Kind {
        switch tape[value].kind {
        case .null: .null
        case .true, .false: .bool
        case .number: .number
        case .string, .escapedString: .string
        case .array: .array
        case .object: .object
        }
    }

    /// An object's members in the text's order: each key's place and its value's.
    public func members(of object: Int) -> [(key: Int, value: Int)] {
        precondition(tape[object].kind == .object, "members of a value that is not an object")
        var members: [(key: Int, value: Int)] = []
        members.reserveCapacity(Int(tape[object].count))
        var entry = object + 1
        for _ in 0..<tape[object].count {
            members.append((entry, entry + 1))
            entry = tape[entry + 1].next
        }
        return members
    }

    /// An array's elements in order.
    public func elements(of array: Int) -> [Int] {
        precondition(tape[array].kind == .array, "elements of a value that is not an array")
        var elements: [Int] = []
        elements.reserveCapacity(Int(tape[array].count))
        var entry = array + 1
        for _ in 0..<tape[array].count {
            elements.append(entry)
            entry = tape[entry].next
        }
        return elements
    }

    /// The value's bytes as written: a string with its quotes, a container from its opener to
    /// its closer.
    public func range(_ value: Int) -> Range<Int> {
        let entry = tape[value]
        switch entry.kind {
        case .string, .escapedString: return (entry.start - 1)..<(entry.end + 1)
        default: return entry.start..<entry.end
        }
    }

    /// A string's bytes between its quotes, as written.
    public func written(_ string: Int) -> ArraySlice<UInt8> {
        precondition(kind(string) == .string, "the text of a value that is not a string")
        return bytes[tape[string].start..<tape[string].end]
    }

    /// Whether a string is written without escapes: its bytes are its value's UTF-8.
    public func isPlain(_ string: Int) -> Bool { tape[string].kind == .string }

    /// A string's value; nil for invalid UTF-8 or a lone surrogate, which `JSONDecoder`
    /// refuses.
    public func string(_ value: Int) -> String? {
        let entry = tape[value]
        switch entry.kind {
        case .string: return String(validating: bytes[entry.start..<entry.end], as: UTF8.self)
        case .escapedString: return unescapeJSON(bytes, entry.start..<entry.end)
        default: return nil
        }
    }
}
