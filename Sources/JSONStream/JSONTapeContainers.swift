import Foundation

struct TapeKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: TapeDecoder
    let object: Int
    let codingPath: [any CodingKey]

    var allKeys: [Key] {
        members().compactMap { key, _ in Key(stringValue: keyString(key)) }
    }

    /// Each member's key entry and value entry.
    private func members() -> [(key: Int, value: Int)] {
        var result: [(key: Int, value: Int)] = []
        var entry = object + 1
        for _ in 0..<decoder.tape[object].count {
            result.append((entry, entry + 1))
            entry = decoder.tape[entry + 1].next
        }
        return result
    }

    private func keyString(_ entry: Int) -> String {
        (try? decoder.string(at: entry, codingPath)) ?? ""
    }

    /// The value entry of `key`'s member: the first, as `JSONDecoder` keeps the first of a
    /// repeated key. Keys are compared as bytes; an escaped one as its value.
    private func find(_ key: Key) -> Int? {
        let tape = decoder.tape
        var name = key.stringValue
        return name.withUTF8 { wanted -> Int? in
            decoder.bytes.withUnsafeBufferPointer { bytes -> Int? in
                var entry = object + 1
                for _ in 0..<tape[object].count {
                    let candidate = tape[entry]
                    if candidate.kind == .string {
                        if candidate.end - candidate.start == wanted.count,
                            wanted.count == 0
                                || memcmp(bytes.baseAddress! + candidate.start, wanted.baseAddress!, wanted.count) == 0
                        {
                            return entry + 1
                        }
                    } else if decoder.unescape(candidate.start..<candidate.end).map({ $0.utf8.elementsEqual(wanted) }) == true {
                        return entry + 1
                    }
                    entry = tape[entry + 1].next
                }
                return nil
            }
        }
    }

    private func value(_ key: Key) throws -> Int {
        guard let entry = find(key) else {
            throw DecodingError.keyNotFound(
                key, .init(codingPath: codingPath, debugDescription: "No value associated with key \(key) (\"\(key.stringValue)\")."))
        }
        return entry
    }

    func contains(_ key: Key) -> Bool { find(key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { decoder.isNull(try value(key)) }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decoder.bool(at: try value(key), codingPath + [key]) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try decoder.string(at: try value(key), codingPath + [key]) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decoder.double(at: try value(key), codingPath + [key]) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decoder.float(at: try value(key), codingPath + [key]) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try integer(type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(type, key) }

    private func integer<I: FixedWidthInteger>(_ type: I.Type, _ key: Key) throws -> I {
        try decoder.integer(type, at: try value(key), codingPath + [key])
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try decoder.unbox(type, at: try value(key), key: key)
    }

    // One lookup, where the protocol's defaults make three (contains, decodeNil, decode).
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        guard let entry = find(key), !decoder.isNull(entry) else { return nil }
        return try decoder.string(at: entry, codingPath + [key])
    }

    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
        guard let entry = find(key), !decoder.isNull(entry) else { return nil }
        return try decoder.integer(type, at: entry, codingPath + [key])
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        guard let entry = find(key), !decoder.isNull(entry) else { return nil }
        return try decoder.bool(at: entry, codingPath + [key])
    }

    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        guard let entry = find(key), !decoder.isNull(entry) else { return nil }
        return try decoder.double(at: entry, codingPath + [key])
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let entry = find(key), !decoder.isNull(entry) else { return nil }
        return try decoder.unbox(type, at: entry, key: key)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        let entry = try value(key)
        guard decoder.tape[entry].kind == .object else { throw decoder.mismatch([String: Any].self, at: entry, codingPath + [key]) }
        return KeyedDecodingContainer(TapeKeyedContainer<NestedKey>(decoder: decoder, object: entry, codingPath: codingPath + [key]))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let entry = try value(key)
        guard decoder.tape[entry].kind == .array else { throw decoder.mismatch([Any].self, at: entry, codingPath + [key]) }
        return TapeUnkeyedContainer(decoder: decoder, array: entry, codingPath: codingPath + [key])
    }

    func superDecoder() throws -> any Decoder {
        try superDecoder(key: TapeKey(stringValue: "super"))
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        try superDecoder(key: key)
    }

    /// `JSONDecoder` gives a decoder of `null` for an absent key.
    private func superDecoder(key: any CodingKey) throws -> any Decoder {
        guard let entry = members().first(where: { keyString($0.key) == key.stringValue })?.value else {
            return TapeDecoder(tape: [TapeEntry(kind: .null, start: 0, end: 0, next: 1)], bytes: [], at: 0, codingPath: codingPath + [key])
        }
        return TapeDecoder(tape: decoder.tape, bytes: decoder.bytes, at: entry, codingPath: codingPath + [key])
    }
}

struct TapeKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) {
        self.stringValue = "Index \(intValue)"
        self.intValue = intValue
    }
}

struct TapeUnkeyedContainer: UnkeyedDecodingContainer {
    let decoder: TapeDecoder
    let array: Int
    let codingPath: [any CodingKey]
    var currentIndex = 0
    /// The entry of the element at `currentIndex`.
    private var entry: Int

    init(decoder: TapeDecoder, array: Int, codingPath: [any CodingKey]) {
        self.decoder = decoder
        self.array = array
        self.codingPath = codingPath
        self.entry = array + 1
    }

    var count: Int? { Int(decoder.tape[array].count) }
    var isAtEnd: Bool { currentIndex >= count! }

    private var key: any CodingKey { TapeKey(intValue: currentIndex) }

    private func atEnd(_ type: Any.Type) -> DecodingError {
        .valueNotFound(type, .init(codingPath: codingPath + [key], debugDescription: "Unkeyed container is at end."))
    }

    private mutating func moveOn() {
        entry = decoder.tape[entry].next
        currentIndex += 1
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else { throw atEnd(Any?.self) }
        guard decoder.isNull(entry) else { return false }
        moveOn()
        return true
    }

    /// The next element read by `read`, moving past it only if it could be read.
    private mutating func read<T>(
        _ type: Any.Type, _ read: (TapeDecoder, Int, @autoclosure () -> [any CodingKey]) throws -> T
    ) throws -> T {
        guard !isAtEnd else { throw atEnd(type) }
        let value = try read(decoder, entry, codingPath + [key])
        moveOn()
        return value
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try read(type) { try $0.bool(at: $1, $2()) } }
    mutating func decode(_ type: String.Type) throws -> String { try read(type) { try $0.string(at: $1, $2()) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try read(type) { try $0.double(at: $1, $2()) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try read(type) { try $0.float(at: $1, $2()) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

    private mutating func integer<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
        try read(type) { try $0.integer(type, at: $1, $2()) }
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let key = key
        return try read(type) { decoder, entry, _ in try decoder.unbox(type, at: entry, key: key) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try read(type) { decoder, entry, path in
            guard decoder.tape[entry].kind == .object else { throw decoder.mismatch([String: Any].self, at: entry, path()) }
            return KeyedDecodingContainer(TapeKeyedContainer<NestedKey>(decoder: decoder, object: entry, codingPath: path()))
        }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try read([Any].self) { decoder, entry, path in
            guard decoder.tape[entry].kind == .array else { throw decoder.mismatch([Any].self, at: entry, path()) }
            return TapeUnkeyedContainer(decoder: decoder, array: entry, codingPath: path())
        }
    }

    mutating func superDecoder() throws -> any Decoder {
        try read((any Decoder).self) { decoder, entry, path in
            TapeDecoder(tape: decoder.tape, bytes: decoder.bytes, at: entry, codingPath: path())
        }
    }
}

struct TapeSingleValueContainer: SingleValueDecodingContainer {
    let decoder: TapeDecoder
    let entry: Int
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool { decoder.isNull(entry) }
    func decode(_ type: Bool.Type) throws -> Bool { try decoder.bool(at: entry, codingPath) }
    func decode(_ type: String.Type) throws -> String { try decoder.string(at: entry, codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try decoder.double(at: entry, codingPath) }
    func decode(_ type: Float.Type) throws -> Float { try decoder.float(at: entry, codingPath) }
    func decode(_ type: Int.Type) throws -> Int { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.integer(type, at: entry, codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.integer(type, at: entry, codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.unbox(type, at: entry) }
}
