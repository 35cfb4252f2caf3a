extension String {
    /// The string with every Unicode scalar for which `replacement` gives text replaced by that
    /// text, the others kept: the one loop under the HTML (``HTMLLadder/escape(_:)``), JUnit XML
    /// and JSON escapers, each of which is only its table.
    package func replacingScalars(_ replacement: (Unicode.Scalar) -> String?) -> String {
        var out = ""
        out.reserveCapacity(utf8.count)
        for scalar in unicodeScalars {
            if let text = replacement(scalar) {
                out += text
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
