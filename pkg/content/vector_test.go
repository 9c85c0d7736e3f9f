package content

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"
)

func le(bits ...uint32) []byte {
	var b []byte
	for _, x := range bits {
		b = binary.LittleEndian.AppendUint32(b, x)
	}
	return b
}

func TestParseVector(t *testing.T) {
	tests := []struct {
		name  string
		in    []byte
		want  []float32
		valid bool
	}{
		{"one", le(0x3f800000), []float32{1}, true},
		{"little-endian", []byte{0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0}, []float32{1, -2}, true},
		{"negative zero and subnormal", le(0x80000000, 0x00000001), []float32{float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32}, true},
		{"largest finite", le(0x7f7fffff), []float32{math.MaxFloat32}, true},
		{"empty", nil, nil, false},
		{"not whole float32s", []byte{1, 2, 3, 4, 5}, nil, false},
		{"quiet NaN", le(0, 0x7fc00000), nil, false},
		{"signalling NaN", le(0x7f800001), nil, false},
		{"negative NaN", le(0xffc00000), nil, false},
		{"+Inf", le(0x7f800000), nil, false},
		{"-Inf", le(0xff800000), nil, false},
		{"too long", make([]byte, 4*(MaxVectorDims+1)), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseVector(tt.in)
			if ok != tt.valid {
				t.Fatalf("ParseVector ok = %v, want %v", ok, tt.valid)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("ParseVector = %v, want %v", got, tt.want)
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(tt.want[i]) {
					t.Errorf("value %d = %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestAppendVectorRoundTrip(t *testing.T) {
	v := []float32{0, 1, -1, 0.1, math.MaxFloat32, -math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1))}
	b := AppendVector([]byte("prefix"), v)
	if string(b[:6]) != "prefix" || len(b) != 6+4*len(v) {
		t.Fatalf("AppendVector wrote %d bytes after the prefix, want %d", len(b)-6, 4*len(v))
	}
	got, ok := ParseVector(b[6:])
	if !ok {
		t.Fatal("ParseVector refused what AppendVector wrote")
	}
	for i := range v {
		if math.Float32bits(got[i]) != math.Float32bits(v[i]) {
			t.Errorf("value %d = %v, want %v", i, got[i], v[i])
		}
	}
}

func TestCheckVector(t *testing.T) {
	tests := []struct {
		name    string
		in      []float32
		wantErr string
	}{
		{"one value", []float32{0}, ""},
		{"largest allowed", make([]float32, MaxVectorDims), ""},
		{"nil", nil, "no values"},
		{"empty", []float32{}, "no values"},
		{"too long", make([]float32, MaxVectorDims+1), "65537 values, more than the 65536 allowed"},
		{"NaN", []float32{1, 2, float32(math.NaN())}, "value 2 is NaN"},
		{"+Inf", []float32{float32(math.Inf(1))}, "value 0 is +Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckVector(tt.in)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckVector: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckVector = %v, want an error saying %q", err, tt.wantErr)
			}
		})
	}
}

func TestCheckVectorOwner(t *testing.T) {
	tests := []struct {
		app, model, wantErr string
	}{
		{"app", "model", ""},
		{"app", "intfloat/multilingual-e5-small@384", ""},
		{"", "model", "empty app"},
		{"app", "", "empty model"},
		{"a\x00p", "model", `app "a\x00p" contains the NUL character`},
		{"app", "m\xff", `model "m\xff" is not valid UTF-8`},
	}
	for _, tt := range tests {
		err := CheckVectorOwner(tt.app, tt.model)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("CheckVectorOwner(%q, %q): %v", tt.app, tt.model, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("CheckVectorOwner(%q, %q) = %v, want an error saying %q", tt.app, tt.model, err, tt.wantErr)
		}
	}
}

func TestSortedVectorKeys(t *testing.T) {
	a, b, c := [32]byte{1}, [32]byte{1, 2}, [32]byte{2}
	got := SortedVectorKeys([][32]byte{c, a, b, a, c})
	if want := [][32]byte{a, b, c}; !slices.Equal(got, want) {
		t.Errorf("SortedVectorKeys = %x, want %x", got, want)
	}
	in := [][32]byte{c, a}
	SortedVectorKeys(in)
	if in[0] != c {
		t.Error("SortedVectorKeys reordered its argument")
	}
}
