// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "a1576f8d30268b7b5b74d66f47796543f2eb0f89253647f0ac22c8dc8b2ac430"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "705b55b2fda2f7bd67a09bc6df5000e2fbbdd2dd5c57a62079ea4cdc5c817604"
}
