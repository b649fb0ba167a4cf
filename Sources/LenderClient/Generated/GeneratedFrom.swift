// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "00a4f45d3bdd6124ad7a309caab10d1ee9f71e4f1f15b28eb77f4ff183274bf8"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "ec5df45152c67afcd3eb4b903b32dfd62bc09f53abc74b342c437e2efc57365c"
}
