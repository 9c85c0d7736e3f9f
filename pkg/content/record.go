package content

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/assistantcms/cms/pkg/tenancy"
)

// Kind is a kind of content record.
type Kind string

// The kinds of content records an app has.
const (
	KindIntent   Kind = "intent"
	KindHandler  Kind = "handler"
	KindEntity   Kind = "entity"
	KindFAQ      Kind = "faq"
	KindDocument Kind = "document"
)

// KindApp names, among revisions only, the states of the app itself: its
// name and fields (channels included).
const KindApp Kind = "app"

// Kinds lists every kind, in the order bundles hold them.
func Kinds() []Kind { return []Kind{KindIntent, KindHandler, KindEntity, KindFAQ, KindDocument} }

// IDField is the field that identifies a record of the kind within its app.
func (k Kind) IDField() string {
	switch k {
	case KindIntent, KindHandler:
		return "intentId"
	case KindEntity:
		return "entityId"
	}
	return "id"
}

// Record is one content record of an app: an intent, handler, entity, FAQ
// or knowledge-base document. Its fields are kept as written, so that
// free-form and future fields survive untouched.
type Record struct {
	Kind  Kind
	AppID string
	ID    string
	// Doc is the record as a JSON object without the server-managed fields
	// (appId, organizationId, createdAt, updatedAt), keys in sorted order.
	Doc json.RawMessage
	// Location is a document's location field, indexed for search filters.
	Location  string
	CreatedAt time.Time
	UpdatedAt time.Time
	// Revision is the app's revision when the record last changed: it
	// names this state of the record among all it has had (see
	// Store.Revisions), and a write made from a read of an older one is
	// refused (see Stale).
	Revision int64
}

// Bundle is a set of content moved in and out in one piece.
type Bundle struct {
	Organizations []tenancy.Organization
	Apps          []tenancy.App
	// Records of every kind.
	Records []Record
	// Tokens are carried by bundles that move a whole content database
	// (api export --tokens). Store.Import and Store.Export leave them to
	// the caller, who copies them with the token methods.
	Tokens []tenancy.Token
}

// Len is the number of items in the bundle.
func (b *Bundle) Len() int { return len(b.Organizations) + len(b.Apps) + len(b.Records) }

// ImportStats counts what an import changed.
type ImportStats struct {
	// Created and Updated count items that were new or differed;
	// Unchanged counts items equal to what was stored; Deleted counts
	// records removed (by restoring an app to a time before them).
	Created, Updated, Unchanged, Deleted int
}

// ExportFilter narrows Export. Empty fields match everything.
type ExportFilter struct {
	OrganizationID string
	AppID          string
}

// serverFields are managed by the service: they are dropped from written
// documents and filled in when records are read.
var serverFields = [...]string{"appId", "organizationId", "createdAt", "updatedAt"}

// IsServerField reports whether a top-level field is managed by the service.
func IsServerField(name string) bool {
	for _, f := range serverFields {
		if f == name {
			return true
		}
	}
	return false
}

// TimeLayout is how times appear in JSON: RFC 3339, UTC, milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// AppendJSON appends the record as clients read it: its document with the
// server-managed fields first.
func (r Record) AppendJSON(dst []byte, organizationID string) []byte {
	return appendDoc(dst, r.Doc, [][2]string{
		{"appId", r.AppID}, {"organizationId", organizationID},
		{"createdAt", r.CreatedAt.UTC().Format(TimeLayout)}, {"updatedAt", r.UpdatedAt.UTC().Format(TimeLayout)},
	})
}

// AppendApp appends the app as clients read it.
func AppendApp(dst []byte, a tenancy.App) []byte {
	return appendDoc(dst, a.Doc, [][2]string{
		{"appId", a.ID}, {"organizationId", a.OrganizationID}, {"name", a.Name},
		{"createdAt", a.CreatedAt.UTC().Format(TimeLayout)}, {"updatedAt", a.UpdatedAt.UTC().Format(TimeLayout)},
	})
}

// appendDoc writes the string fields, then the members of doc.
func appendDoc(dst []byte, doc json.RawMessage, fields [][2]string) []byte {
	dst = append(dst, '{')
	for i, f := range fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, f[0])
		dst = append(dst, ':')
		dst = appendString(dst, f[1])
	}
	body := bytes.TrimSpace(doc)
	if len(body) > 2 { // more than "{}"
		dst = append(dst, ',')
		dst = append(dst, body[1:len(body)-1]...)
	}
	return append(dst, '}')
}

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}

// Section names a list of a bundle.
type Section string

// The lists of a bundle.
const (
	SectionOrganizations Section = "organizations"
	SectionApps          Section = "apps"
	SectionRecords       Section = "records"
)

// ItemError is the failure of one item of a bundle during an import. Err is
// a Problem when the item itself is at fault, with a path inside the item.
type ItemError struct {
	Section Section
	// Index is the item's position in its list of the Bundle.
	Index int
	Err   error
}

func (e *ItemError) Error() string { return fmt.Sprintf("%s[%d]: %v", e.Section, e.Index, e.Err) }

func (e *ItemError) Unwrap() error { return e.Err }
