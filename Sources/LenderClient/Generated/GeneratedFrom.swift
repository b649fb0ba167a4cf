// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "405d0d205d7354b4ebaa3f4d4ebd6765a586713bfe4ec06a458bfee63106c611"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "8cf8bd0fe3a164197f0e90a8348cf2d276f2fb26f591be929b996a31b3df207b"
}
