package content

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// FieldChange is one field that differs between two states of a record.
// Path names it from the record's top: "name", "content.Hello" (an
// object's member); a list is one field, compared whole. Before or After
// is nil where the field is absent.
type FieldChange struct {
	Path          string
	Before, After json.RawMessage
}

// Diff lists the fields that differ from before to after, two JSON
// objects (a record's Doc), in order of path. Objects are compared member
// by member, everything else as a whole value; numbers compare as
// written.
func Diff(before, after []byte) ([]FieldChange, error) {
	a, err := decodeObject(before)
	if err != nil {
		return nil, fmt.Errorf("diff: the earlier state: %w", err)
	}
	b, err := decodeObject(after)
	if err != nil {
		return nil, fmt.Errorf("diff: the later state: %w", err)
	}
	var out []FieldChange
	diffObjects("", a, b, &out)
	return out, nil
}

func decodeObject(doc []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if len(bytes.TrimSpace(doc)) == 0 {
		return map[string]json.RawMessage{}, nil
	}
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, err
	}
	return m, nil
}

func diffObjects(prefix string, a, b map[string]json.RawMessage, out *[]FieldChange) {
	keys := slices.Sorted(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		va, inA := a[k]
		vb, inB := b[k]
		if inA && inB {
			oa, errA := objectOf(va)
			ob, errB := objectOf(vb)
			if errA == nil && errB == nil {
				diffObjects(path, oa, ob, out)
				continue
			}
			if sameJSON(va, vb) {
				continue
			}
		}
		c := FieldChange{Path: path}
		if inA {
			c.Before = va
		}
		if inB {
			c.After = vb
		}
		*out = append(*out, c)
	}
}

// objectOf decodes v when it is a JSON object.
func objectOf(v json.RawMessage) (map[string]json.RawMessage, error) {
	t := bytes.TrimSpace(v)
	if len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("not an object")
	}
	var m map[string]json.RawMessage
	err := json.Unmarshal(t, &m)
	return m, err
}

// sameJSON compares two JSON values as written, whitespace aside.
func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
