package content

import (
	"bytes"
	"context"
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

// RevisionReader reads a record's revisions (see Store.Revisions).
type RevisionReader interface {
	Revisions(ctx context.Context, appID string, kind Kind, id string, before int64, limit int) ([]Revision, error)
}

// NoSuchRevision is the error of comparing a revision a record does not
// have; Second says whether it is the second of the two.
type NoSuchRevision struct {
	Revision int64
	Second   bool
}

func (e *NoSuchRevision) Error() string {
	return fmt.Sprintf("the record has no revision %d", e.Revision)
}

// DiffRevisions is Diff of two revisions of a record, a deletion compared
// as an empty record. It fails with a *NoSuchRevision error when the
// record does not have one of them.
func DiffRevisions(ctx context.Context, s RevisionReader, appID string, kind Kind, id string, from, to int64) ([]FieldChange, error) {
	var docs [2][]byte
	for i, rev := range []int64{from, to} {
		got, err := s.Revisions(ctx, appID, kind, id, rev+1, 1)
		if err != nil {
			return nil, err
		}
		if len(got) == 0 || got[0].Revision != rev {
			return nil, &NoSuchRevision{Revision: rev, Second: i == 1}
		}
		if !got[0].Deleted {
			docs[i] = got[0].Doc
		}
	}
	return Diff(docs[0], docs[1])
}
