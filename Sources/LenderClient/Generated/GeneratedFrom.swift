// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "5d9f1c816d3b0a67ee3bbe34fd1ac2e62d29a4fb6f34c67ae580e5f5fe146be1"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "a999c66fa75658b5c607229ad46efb39c06b37e6ccbd7d992fbc9fbe77bc060c"
}
