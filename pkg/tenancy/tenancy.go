// Package tenancy is who the service serves: organizations, their apps,
// the access tokens that act for them and what each token may do
// (scopes), and the store contract for them. Both halves of the product
// build on it, the content API and the event pipeline, and it imports
// neither: a token is checked without the content model.
package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Errors returned by every Store implementation (and by the content
// store, which answers with the same values). Callers test them with
// errors.Is; implementations wrap them with detail.
var (
	// ErrNotFound means the record asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a record with the same identifier already exists.
	ErrConflict = errors.New("already exists")
)

// MaxIDLength bounds identifiers, which appear in URL paths.
const MaxIDLength = 256

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

// Store keeps organizations, apps and tokens. Implementations must be
// safe for concurrent use.
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
}

// ChannelsOf reads the channels of a stored app document.
func ChannelsOf(doc json.RawMessage) []Channel {
	var d struct {
		Channels []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Key  string `json:"key"`
		} `json:"channels"`
	}
	if len(doc) == 0 || json.Unmarshal(doc, &d) != nil {
		return nil
	}
	out := make([]Channel, 0, len(d.Channels))
	for _, c := range d.Channels {
		out = append(out, Channel{ID: c.ID, Type: c.Type, Key: c.Key})
	}
	return out
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
