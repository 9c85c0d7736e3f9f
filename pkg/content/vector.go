package content

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxVectorDims bounds the dimensions of a stored vector (256 KiB of
// float32s), far above any sentence-embedding model, so that a caller's
// mistake cannot fill the database with one row.
const MaxVectorDims = 1 << 16

// CheckVectorOwner checks the app and model that key stored vectors: both
// must be non-empty UTF-8 without NUL, which PostgreSQL text cannot hold, so
// that both backends refuse the same input with the same message.
func CheckVectorOwner(app, model string) error {
	for _, f := range []struct{ name, value string }{{"app", app}, {"model", model}} {
		switch {
		case f.value == "":
			return fmt.Errorf("empty %s", f.name)
		case !utf8.ValidString(f.value):
			return fmt.Errorf("%s %q is not valid UTF-8", f.name, f.value)
		case strings.IndexByte(f.value, 0) >= 0:
			return fmt.Errorf("%s %q contains the NUL character (U+0000)", f.name, f.value)
		}
	}
	return nil
}

// CheckVector checks one vector given to be stored: it must have between 1
// and MaxVectorDims values, all finite.
func CheckVector(v []float32) error {
	if len(v) == 0 {
		return errors.New("vector has no values")
	}
	if len(v) > MaxVectorDims {
		return fmt.Errorf("vector has %d values, more than the %d allowed", len(v), MaxVectorDims)
	}
	for i, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return fmt.Errorf("vector value %d is %v; values must be finite", i, f)
		}
	}
	return nil
}

// AppendVector appends v as little-endian float32s, the stored form.
func AppendVector(dst []byte, v []float32) []byte {
	dst = slices.Grow(dst, 4*len(v))
	for _, f := range v {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(f))
	}
	return dst
}

// AddStoredVector adds a stored row, its hash and vector in the stored
// form, to out; a row of a wrong hash length or an unreadable vector is
// left out, as absent, so it never matches a wrong key.
func AddStoredVector(out map[[32]byte][]float32, hash, vec []byte) {
	if len(hash) != 32 {
		return
	}
	if v, ok := ParseVector(vec); ok {
		out[[32]byte(hash)] = v
	}
}

// ParseVector reads the stored form. It reports false for bytes that are
// not a whole, non-zero number of float32s or that hold NaN or infinity:
// such a row was not written by AppendVector from a checked vector, and
// callers treat it as absent.
func ParseVector(b []byte) ([]float32, bool) {
	if len(b) == 0 || len(b)%4 != 0 || len(b)/4 > MaxVectorDims {
		return nil, false
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		bits := binary.LittleEndian.Uint32(b[4*i:])
		// All exponent bits set is NaN or infinity.
		if bits&0x7f80_0000 == 0x7f80_0000 {
			return nil, false
		}
		v[i] = math.Float32frombits(bits)
	}
	return v, true
}

// SortedVectorKeys returns the distinct hashes in byte order. Stores write
// and lock rows in this order, so that concurrent calls over overlapping
// keys wait for each other instead of deadlocking.
func SortedVectorKeys(hashes [][32]byte) [][32]byte {
	keys := slices.Clone(hashes)
	slices.SortFunc(keys, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	return slices.Compact(keys)
}
