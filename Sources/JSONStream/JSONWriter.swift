import Foundation

/// A value that writes its JSON itself, member by member, where `Encodable` pays for boxed
/// containers and generic metadata on every member: for the resources a list returns twenty
/// of (through `Encodable` they were a fifth of the server's time on the market, `perf`).
/// The bytes must be exactly those of its `Encodable` form in the answers' style
/// (`JSONStream.Style.responsesThroughCodable`); the server's `JSONWriterTests` compare them.
///
/// `JSONStream.encode` in the answers' style hands such a value its bytes (`JSONSelfWriting`),
/// at the top of an answer or anywhere inside one.
public protocol JSONWritable: JSONSelfWriting {
    func write(to json: inout JSONWriter) throws
}

extension JSONWritable {
    /// Writes on in the encoder's own bytes, without copying them.
    @inlinable
    public func writeJSON(into bytes: inout [UInt8]) throws {
        var json = JSONWriter()
        json.exchangeBytes(with: &bytes)
        defer { json.exchangeBytes(with: &bytes) }
        try write(to: &json)
    }
}

/// JSON written straight into bytes, in the encoder's spelling: escapes, numbers and dates as
/// `JSONSink` writes them (`JSONSink.appendEscaped`, `numberText`, `appendQuotedISO8601`),
/// absent optionals as `null`. Members are written in the order they are called: a writer
/// that follows its type's declaration order writes what the encoder writes.
///
/// The methods are `@inlinable`: a resource's `write(to:)` calls one per member, from the
/// module that declares the resource.
public struct JSONWriter {
    @usableFromInline var bytes: [UInt8] = []
    /// A value was written at this level: the next member or element needs a comma first.
    @usableFromInline var needsComma = false

    @inlinable
    public init() {}

    /// Swaps the bytes written so far with `other`: to write on in the encoder's own bytes
    /// without copying them.
    @inlinable
    public mutating func exchangeBytes(with other: inout [UInt8]) { swap(&bytes, &other) }

    @inlinable
    public mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
    }

    @inlinable
    public mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    @inlinable
    public mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
    }

    @inlinable
    public mutating func endArray() {
        bytes.append(UInt8(ascii: "]"))
        needsComma = true
    }

    /// A member's key; its value is written next. Keys are the resources' own plain names,
    /// written as they are: no key needs escaping.
    @inlinable
    public mutating func key(_ key: StaticString) {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        bytes.append(contentsOf: "\":".utf8)
        needsComma = false
    }

    /// A member's key named at run time (a declared column's member), escaped as a string is.
    public mutating func key(_ key: String) {
        value(key)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    @inlinable
    mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = false
    }

    @inlinable
    mutating func raw(_ text: String) {
        separate()
        bytes.append(contentsOf: text.utf8)
        needsComma = true
    }

    @inlinable
    public mutating func null() { raw("null") }

    @inlinable
    public mutating func value(_ text: String) {
        separate()
        var text = text
        text.withUTF8 { JSONSink.appendEscaped($0, to: &bytes) }
        needsComma = true
    }

    @inlinable
    public mutating func value(_ flag: Bool) { raw(flag ? "true" : "false") }
    @inlinable
    public mutating func value(_ number: Int) { raw(String(number)) }
    @inlinable
    public mutating func value(_ number: Int64) { raw(String(number)) }

    @inlinable
    public mutating func value(_ date: Date) {
        separate()
        JSONSink.appendQuotedISO8601(date, to: &bytes)
        needsComma = true
    }

    /// A finite number as the encoder writes it; NaN and the infinities are refused, as there.
    @inlinable
    public mutating func value(_ number: Double) throws {
        guard let text = JSONSink.numberText(number) else {
            throw EncodingError.invalidValue(number, .init(codingPath: [], debugDescription: "\(number) is not valid JSON"))
        }
        raw(text)
    }

    @inlinable
    public mutating func value(_ writable: some JSONWritable) throws { try writable.write(to: &self) }

    @inlinable
    public mutating func value(_ elements: [some JSONWritable]) throws {
        beginArray()
        for element in elements { try element.write(to: &self) }
        endArray()
    }

    @inlinable
    public mutating func value(_ text: String?) {
        if let text { value(text) } else { null() }
    }

    @inlinable
    public mutating func value(_ number: Int?) {
        if let number { value(number) } else { null() }
    }

    @inlinable
    public mutating func value(_ number: Int64?) {
        if let number { value(number) } else { null() }
    }

    @inlinable
    public mutating func value(_ number: Double?) throws {
        if let number { try value(number) } else { null() }
    }

    @inlinable
    public mutating func field(_ name: StaticString, _ text: String) {
        key(name)
        value(text)
    }

    @inlinable
    public mutating func field(_ name: StaticString, _ flag: Bool) {
        key(name)
        value(flag)
    }

    @inlinable
    public mutating func field(_ name: StaticString, _ text: String?) {
        key(name)
        value(text)
    }

    @inlinable
    public mutating func field(_ name: StaticString, _ number: Int) {
        key(name)
        value(number)
    }

    @inlinable
    public mutating func field(_ name: StaticString, _ number: Int?) {
        key(name)
        value(number)
    }

    @inlinable
    public mutating func field(_ name: StaticString, _ number: Int64?) {
        key(name)
        value(number)
    }

    @inlinable
    public mutating func field(_ name: StaticString, _ number: Double) throws {
        key(name)
        try value(number)
    }

    @inlinable
    public mutating func field(_ name: StaticString, _ number: Double?) throws {
        key(name)
        try value(number)
    }

    @inlinable
    public mutating func field(_ name: StaticString, _ date: Date) {
        key(name)
        value(date)
    }

    @inlinable
    public mutating func field(_ name: StaticString, _ writable: some JSONWritable) throws {
        key(name)
        try value(writable)
    }

    @inlinable
    public mutating func field(_ name: StaticString, _ writable: (some JSONWritable)?) throws {
        key(name)
        if let writable { try value(writable) } else { null() }
    }

    @inlinable
    public mutating func field(_ name: StaticString, _ elements: [some JSONWritable]) throws {
        key(name)
        try value(elements)
    }
}
