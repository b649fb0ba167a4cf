// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "88a72fb42f570519f75cbaa5a925a066a4ce4690472d683569d2ef52c3f23f60"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "1ac9c7b5cb3a20e805fa6647ea4dbd3feae823c5aab36cb9b77b9288f775da72"
}
