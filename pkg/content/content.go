// Package content holds the content model shared by the api and ingest
// services (organizations, apps, access tokens and the apps' content
// records) and the Store contract every backend implements.
package content

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Errors returned by every Store implementation. Callers test them with
// errors.Is; implementations wrap them with detail.
var (
	// ErrNotFound means the record asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a record with the same identifier already exists.
	ErrConflict = errors.New("already exists")
)

// Organization owns apps and organization-level tokens.
type Organization struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// App is one assistant application.
type App struct {
	ID             string
	OrganizationID string
	Name           string
	// Doc holds the app's other fields as written (a JSON object without
	// appId, organizationId, name and the times); nil means none.
	Doc json.RawMessage
	// Channels are the app's channels as found in Doc.
	Channels  []Channel
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Channel is one channel of an app. Key, when set, names the channel to
// the suggestions endpoint; keys are unique across all apps.
type Channel struct {
	ID   string
	Type string
	Key  string
}

// Token is a stored access token. The secret itself is never stored: Hash is
// the SHA-256 of the full token string.
type Token struct {
	ID             string
	Hash           []byte
	OrganizationID string
	// AppID is empty for an organization-level token.
	AppID string
	// Scopes is what the token may do; a store refuses a token without any.
	Scopes    Scopes
	Name      string
	CreatedAt time.Time
	// RevokedAt is zero while the token is active.
	RevokedAt time.Time
}

// Revoked reports whether the token has been revoked.
func (t Token) Revoked() bool { return !t.RevokedAt.IsZero() }

// TokenFilter narrows ListTokens. Empty fields match everything.
type TokenFilter struct {
	OrganizationID string
	AppID          string
}

// Store is the content database. Implementations must be safe for
// concurrent use and must pass the suite in package contenttest.
type Store interface {
	CreateOrganization(ctx context.Context, org Organization) error
	Organization(ctx context.Context, id string) (Organization, error)
	ListOrganizations(ctx context.Context) ([]Organization, error)

	// CreateApp fails with ErrNotFound when the organization does not exist.
	CreateApp(ctx context.Context, app App) error
	App(ctx context.Context, id string) (App, error)
	// AppByChannelKey returns the app with a channel of that key, and the
	// channel's ID.
	AppByChannelKey(ctx context.Context, key string) (App, string, error)
	ListApps(ctx context.Context, organizationID string) ([]App, error)

	// CreateToken fails with ErrNotFound when the organization or app does
	// not exist, or when the app belongs to another organization.
	CreateToken(ctx context.Context, tok Token) error
	Token(ctx context.Context, id string) (Token, error)
	// ListTokens returns tokens ordered by creation time, then ID.
	ListTokens(ctx context.Context, f TokenFilter) ([]Token, error)
	// RevokeToken marks the token revoked at the given time. Revoking a
	// revoked token keeps the first revocation time and is not an error.
	RevokeToken(ctx context.Context, id string, at time.Time) error

	// Record returns one content record of an app.
	Record(ctx context.Context, appID string, kind Kind, id string) (Record, error)
	// ListRecords returns the app's records of one kind ordered by ID.
	ListRecords(ctx context.Context, appID string, kind Kind) ([]Record, error)
	// Revision is a number that changes whenever the app or any of its
	// records changes, so that readers can tell when a cache is stale.
	Revision(ctx context.Context, appID string) (int64, error)
	// Import upserts a bundle in one transaction: either all of it is
	// applied or, on error, nothing. Records equal to what is stored are
	// left alone (their updatedAt does not move). progress, when not nil,
	// is called with the number of items written so far.
	Import(ctx context.Context, b *Bundle, progress func(done int)) (ImportStats, error)
	// Export returns the organizations, apps and records matching f, in
	// the order listings use.
	Export(ctx context.Context, f ExportFilter) (*Bundle, error)

	// CreateRecord stores a new record and returns it with its times. It
	// fails with ErrConflict when the app already has a record of that kind
	// and ID, and with ErrNotFound when the app does not exist.
	CreateRecord(ctx context.Context, r Record) (Record, error)
	// UpdateRecord replaces a record with what change makes of it, reading
	// and writing in one transaction; an error from change aborts it. It
	// fails with ErrNotFound when there is no such record.
	UpdateRecord(ctx context.Context, appID string, kind Kind, id string, change func(Record) (Record, error)) (Record, error)
	// DeleteRecord removes a record and returns it as it was. It fails
	// with ErrNotFound when there is no such record.
	DeleteRecord(ctx context.Context, appID string, kind Kind, id string) (Record, error)

	Close() error
}

// MissingOwner explains why a store refused a token for a foreign key: the
// app does not exist or is another organization's, or the organization
// does not exist. Stores call it only on that failure path, so that the
// insert stays a single statement.
func MissingOwner(ctx context.Context, s interface {
	App(ctx context.Context, id string) (App, error)
	Organization(ctx context.Context, id string) (Organization, error)
}, tok Token) error {
	if tok.AppID != "" {
		app, err := s.App(ctx, tok.AppID)
		if err != nil {
			return err
		}
		if app.OrganizationID != tok.OrganizationID {
			return fmt.Errorf("app %q in organization %q: %w", tok.AppID, tok.OrganizationID, ErrNotFound)
		}
	}
	if _, err := s.Organization(ctx, tok.OrganizationID); err != nil {
		return err
	}
	// The owner appeared between the insert and this check.
	return fmt.Errorf("owner of token: %w", ErrNotFound)
}
