// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "c7a9fe770837f93308506395375eb0a8595124e5d76a1c4526b5d6c13bb40229"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "e7d32d1027f8a99eeaf243e87ffc3493c6df6c61c3dd3a49e1579b2ec7f9925f"
}
