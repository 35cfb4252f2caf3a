/// An array of `capacity` elements at most, filled by `body`, which writes them from the
/// start of the buffer it is given and returns how many it wrote.
///
/// This stands in for `Array(unsafeUninitializedCapacity:initializingWith:)` on the hot path:
/// the standard library allocates that array's storage in a function it does not inline, which
/// looks the storage class's generic metadata up at run time on every call (about 600
/// instructions, as much as the copy it serves). Here the elements are written to a temporary
/// buffer (on the stack when small) and copied once into an array allocated through the
/// inlinable, specialized path.
@inlinable
package func makeArray<Element: BitwiseCopyable>(capacity: Int, _ body: (UnsafeMutableBufferPointer<Element>) -> Int) -> [Element] {
    withUnsafeTemporaryAllocation(of: Element.self, capacity: max(capacity, 1)) { buffer in
        let count = body(buffer)
        return Array(UnsafeBufferPointer(rebasing: buffer[..<count]))
    }
}
