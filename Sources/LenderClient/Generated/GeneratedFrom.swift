// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "729b552ff8699486fe145959161cb4aa261857a8ab1b5d169bdd07eefdfcce15"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "0675b40ab5025a6a1512705aa1925bfe6f54072201c88a66cf19dab80bf89630"
}
