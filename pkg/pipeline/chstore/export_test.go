package chstore

// TestStringColumns lets the external tests of the package insert as its
// own tests do.
var TestStringColumns = stringColumns
