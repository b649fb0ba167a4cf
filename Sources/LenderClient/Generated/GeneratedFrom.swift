// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "5157ae0c8883d47047fad15c3d1307c2ae0d95704791274ab9d8e1ddd0300b9a"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "e795b6815b0796688ab0f7f49d30ae837597f0fd336e30bc53de7878d96cd1c1"
}
