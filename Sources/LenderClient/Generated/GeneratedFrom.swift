// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "b7dac02df98efd10ec9aea962ccbbfd182d6cee76a1c62f207122ab0c0eca225"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "fe5b52fc47869d9fd0c3306c78a941cc382bbe28c98e73475a0b628a3e04bb83"
}
