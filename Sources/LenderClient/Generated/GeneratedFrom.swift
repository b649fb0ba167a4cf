// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "d7976c3e15786769d2b1321952ca5120b4cbc712c29fb5982f95f8be7f1fbcd5"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "c20a855b91c46e2caa6483f883bc0f95f41d50d1baf730c0ad91fcb3ba4812ae"
}
