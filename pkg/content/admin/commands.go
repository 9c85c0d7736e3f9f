package admin

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// Records the demo command ensures.
const (
	demoOrgID   = "demo-org"
	demoOrgName = "Demo organization"
	demoAppID   = "demo-app"
	demoAppName = "Demo app"
	// The demo's tokens are named for what they are; demoLegacyName is
	// what demo tokens were named before tokens had scopes, and --rotate
	// revokes those too.
	demoRuntimeName    = "demo-runtime"
	demoManagementName = "demo-management"
	demoLegacyName     = "demo"
)

// Presets of token create's --scopes.
const (
	presetRuntime    = "runtime"
	presetManagement = "management"
	presetPreview    = "preview"
)

// scopesFlags are the flags that choose a new token's scopes.
type scopesFlags struct {
	runtime, preview, management *bool
	list                         *string
}

func addScopesFlags(fs *flag.FlagSet) scopesFlags {
	return scopesFlags{
		runtime:    fs.Bool("runtime", false, "a runtime token: content:read,events:write (the default; the only kind a web page may carry)"),
		preview:    fs.Bool("preview", false, "a preview runtime token: content:draft,content:read,events:write (a runtime's, reading the draft of an app that publishes)"),
		management: fs.Bool("management", false, "a management token: every scope ("+tenancy.AllScopes.String()+"); keep it secret"),
		list: fs.String("scopes", "", "the token's scopes, comma-separated: "+strings.Join(tenancy.ScopeNames(), ", ")+
			", or a preset ("+presetRuntime+", "+presetPreview+", "+presetManagement+")"),
	}
}

// scopes returns the scopes chosen, the runtime preset when none is.
func (f scopesFlags) scopes() (tenancy.Scopes, error) {
	chosen := 0
	for _, set := range []bool{*f.runtime, *f.preview, *f.management, *f.list != ""} {
		if set {
			chosen++
		}
	}
	if chosen > 1 {
		return 0, usagef("give at most one of --runtime, --preview, --management and --scopes")
	}
	switch {
	case *f.management:
		return tenancy.AllScopes, nil
	case *f.preview:
		return tenancy.PreviewScopes, nil
	case *f.list != "":
		return parseScopesFlag(*f.list)
	}
	return tenancy.RuntimeScopes, nil
}

// parseScopesFlag reads --scopes: scope names or one preset.
func parseScopesFlag(v string) (tenancy.Scopes, error) {
	switch strings.TrimSpace(v) {
	case presetRuntime:
		return tenancy.RuntimeScopes, nil
	case presetManagement:
		return tenancy.AllScopes, nil
	case presetPreview:
		return tenancy.PreviewScopes, nil
	}
	s, err := tenancy.ParseScopes(v)
	if err != nil {
		return 0, usagef("--scopes: %v", err)
	}
	if s == 0 {
		return 0, usagef("--scopes: name at least one scope")
	}
	return s, nil
}

func orgCreate(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	name := fs.String("name", "", "organization `name` (required)")
	id := fs.String("id", "", "organization `ID` (default: generated, org-XXXXXXXX)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := requireFlag("name", *name); err != nil {
		return err
	}
	if err := idOrNew("id", id, "org"); err != nil {
		return err
	}
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	if err := createOrg(ctx, st, *id, *name); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, *id)
	return nil
}

func createOrg(ctx context.Context, st content.Store, id, name string) error {
	err := st.CreateOrganization(ctx, tenancy.Organization{ID: id, Name: name, CreatedAt: time.Now().UTC()})
	if errors.Is(err, content.ErrConflict) {
		return &userError{fmt.Sprintf("organization %q already exists", id), err}
	}
	if err != nil {
		return fmt.Errorf("create organization %q: %w", id, err)
	}
	return nil
}

func orgList(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	orgs, err := st.ListOrganizations(ctx)
	if err != nil {
		return fmt.Errorf("list organizations: %w", err)
	}
	if *asJSON {
		type orgJSON struct {
			ID        string    `json:"id"`
			Name      string    `json:"name"`
			CreatedAt time.Time `json:"created_at"`
		}
		out := make([]orgJSON, 0, len(orgs))
		for _, o := range orgs {
			out = append(out, orgJSON{o.ID, o.Name, o.CreatedAt})
		}
		return writeJSON(c.stdout, out)
	}
	rows := [][]string{{"ID", "NAME", "CREATED"}}
	for _, o := range orgs {
		rows = append(rows, []string{o.ID, o.Name, formatTime(o.CreatedAt)})
	}
	return writeTable(c.stdout, rows)
}

func appCreate(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	org := fs.String("org", "", "`ORGID` of the owning organization (required)")
	name := fs.String("name", "", "app `name` (required)")
	id := fs.String("id", "", "app `ID` (default: generated, app-XXXXXXXX)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := requireFlag("org", *org); err != nil {
		return err
	}
	if err := requireFlag("name", *name); err != nil {
		return err
	}
	if err := idOrNew("id", id, "app"); err != nil {
		return err
	}
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	if err := createApp(ctx, st, *id, *org, *name); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, *id)
	return nil
}

func createApp(ctx context.Context, st content.Store, id, org, name string) error {
	now := time.Now().UTC()
	err := st.CreateApp(ctx, tenancy.App{ID: id, OrganizationID: org, Name: name, CreatedAt: now, UpdatedAt: now})
	switch {
	case errors.Is(err, content.ErrConflict):
		return &userError{fmt.Sprintf("app %q already exists", id), err}
	case errors.Is(err, content.ErrNotFound):
		return &userError{fmt.Sprintf("organization %q not found", org), err}
	case err != nil:
		return fmt.Errorf("create app %q: %w", id, err)
	}
	return nil
}

func appList(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	org := fs.String("org", "", "list only the apps of organization `ORGID`")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	if *org != "" {
		if _, err := getOrg(ctx, st, *org); err != nil {
			return err
		}
	}
	apps, err := st.ListApps(ctx, *org)
	if err != nil {
		return fmt.Errorf("list apps: %w", err)
	}
	if *asJSON {
		type appJSON struct {
			ID             string    `json:"id"`
			OrganizationID string    `json:"organization_id"`
			Name           string    `json:"name"`
			CreatedAt      time.Time `json:"created_at"`
			UpdatedAt      time.Time `json:"updated_at"`
		}
		out := make([]appJSON, 0, len(apps))
		for _, a := range apps {
			out = append(out, appJSON{a.ID, a.OrganizationID, a.Name, a.CreatedAt, a.UpdatedAt})
		}
		return writeJSON(c.stdout, out)
	}
	rows := [][]string{{"ID", "ORG", "NAME", "CREATED"}}
	for _, a := range apps {
		rows = append(rows, []string{a.ID, a.OrganizationID, a.Name, formatTime(a.CreatedAt)})
	}
	return writeTable(c.stdout, rows)
}

func tokenCreate(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	appID := fs.String("app", "", "create an app token for `APPID`")
	orgID := fs.String("org", "", "create an organization token for `ORGID`")
	name := fs.String("name", "", "`description` of the token, shown in listings")
	quiet := fs.Bool("quiet", false, "print only the token")
	sf := addScopesFlags(fs)
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if (*appID == "") == (*orgID == "") {
		return usagef("give exactly one of --app or --org")
	}
	scopes, err := sf.scopes()
	if err != nil {
		return err
	}
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	var tok tenancy.Token
	if *appID != "" {
		app, err := getApp(ctx, st, *appID)
		if err != nil {
			return err
		}
		tok = tenancy.Token{OrganizationID: app.OrganizationID, AppID: app.ID}
	} else {
		tok = tenancy.Token{OrganizationID: *orgID}
	}
	tok.Name, tok.Scopes = *name, scopes
	tok, secret, err := createToken(ctx, st, tok)
	if err != nil {
		return err
	}
	printToken(c.stdout, tok, secret, *quiet)
	return nil
}

// createToken stores a new token with owner and name from tok. It returns
// the stored record and the token string, which exists nowhere else
// afterwards.
func createToken(ctx context.Context, st content.Store, tok tenancy.Token) (tenancy.Token, string, error) {
	secret, id, err := auth.NewToken()
	if err != nil {
		return tok, "", fmt.Errorf("create token: %w", err)
	}
	tok.ID = id
	tok.Hash = auth.HashToken(secret)
	tok.CreatedAt = time.Now().UTC()
	err = st.CreateToken(ctx, tok)
	switch {
	case errors.Is(err, content.ErrNotFound) && tok.AppID != "":
		return tok, "", &userError{fmt.Sprintf("app %q not found in organization %q", tok.AppID, tok.OrganizationID), err}
	case errors.Is(err, content.ErrNotFound):
		return tok, "", &userError{fmt.Sprintf("organization %q not found", tok.OrganizationID), err}
	case err != nil:
		return tok, "", fmt.Errorf("create token: %w", err)
	}
	return tok, secret, nil
}

func printToken(w io.Writer, tok tenancy.Token, secret string, quiet bool) {
	if quiet {
		fmt.Fprintln(w, secret)
		return
	}
	owner := fmt.Sprintf("organization %q", tok.OrganizationID)
	if tok.AppID != "" {
		owner = fmt.Sprintf("app %q (organization %q)", tok.AppID, tok.OrganizationID)
	}
	kind := "Keep it secret: it can do more than a runtime needs, and a web page must never carry it."
	switch {
	case tenancy.RuntimeScopes.Has(tok.Scopes):
		kind = "A runtime token: it reads content and sends events, nothing more, so a web page may carry it."
	case tenancy.PreviewScopes.Has(tok.Scopes):
		kind = "A preview runtime token: it reads content, the draft of an app that publishes, and sends events, nothing more, so a test build's page may carry it."
	}
	fmt.Fprintf(w, "Created token %s for %s with scopes %s:\n\n%s\n\n%s\nStore it now: it cannot be shown again.\n",
		tok.ID, owner, tok.Scopes, secret, kind)
}

func tokenList(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	appID := fs.String("app", "", "list only the tokens of app `APPID`")
	orgID := fs.String("org", "", "list only the tokens of organization `ORGID`, its apps' included")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	if *orgID != "" {
		if _, err := getOrg(ctx, st, *orgID); err != nil {
			return err
		}
	}
	if *appID != "" {
		if _, err := getApp(ctx, st, *appID); err != nil {
			return err
		}
	}
	toks, err := st.ListTokens(ctx, tenancy.TokenFilter{OrganizationID: *orgID, AppID: *appID})
	if err != nil {
		return fmt.Errorf("list tokens: %w", err)
	}
	// Only listed fields are copied out: the hash never reaches the output.
	if *asJSON {
		type tokenJSON struct {
			ID             string    `json:"id"`
			Scope          string    `json:"scope"`
			OrganizationID string    `json:"organization_id"`
			AppID          string    `json:"app_id,omitempty"`
			Scopes         []string  `json:"scopes"`
			Name           string    `json:"name"`
			CreatedAt      time.Time `json:"created_at"`
			RevokedAt      time.Time `json:"revoked_at,omitzero"`
			Status         string    `json:"status"`
		}
		out := make([]tokenJSON, 0, len(toks))
		for _, t := range toks {
			out = append(out, tokenJSON{t.ID, scope(t), t.OrganizationID, t.AppID, t.Scopes.Names(), t.Name, t.CreatedAt, t.RevokedAt, status(t)})
		}
		return writeJSON(c.stdout, out)
	}
	rows := [][]string{{"ID", "LEVEL", "ORG", "APP", "SCOPES", "NAME", "CREATED", "STATUS"}}
	for _, t := range toks {
		rows = append(rows, []string{t.ID, scope(t), t.OrganizationID, t.AppID, t.Scopes.String(), t.Name, formatTime(t.CreatedAt), status(t)})
	}
	return writeTable(c.stdout, rows)
}

func scope(t tenancy.Token) string {
	if t.AppID != "" {
		return "app"
	}
	return "org"
}

func status(t tenancy.Token) string {
	if t.Revoked() {
		return "revoked"
	}
	return "active"
}

func tokenRevoke(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	id := fs.Arg(0)
	// A pasted token string stands for its id.
	if tid, err := auth.ParseToken(id); err == nil {
		id = tid
	}
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	tok, err := st.Token(ctx, id)
	if errors.Is(err, content.ErrNotFound) {
		return &userError{fmt.Sprintf("token %q not found", id), err}
	}
	if err != nil {
		return fmt.Errorf("revoke token %q: %w", id, err)
	}
	if tok.Revoked() {
		fmt.Fprintf(c.stdout, "Token %s was already revoked at %s.\n", id, formatTime(tok.RevokedAt))
		return nil
	}
	if err := st.RevokeToken(ctx, id, time.Now().UTC()); err != nil {
		return fmt.Errorf("revoke token %q: %w", id, err)
	}
	fmt.Fprintf(c.stdout, "Token %s revoked.\n", id)
	return nil
}

// demo ensures the demo organization and app and prints a new token for the
// app. Creating a token each time keeps it usable by a local start script
// without ever storing the secret; --rotate keeps a script that runs at
// every start (a compose seed) from leaving one more live token each time.
func demo(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	quiet := fs.Bool("quiet", false, "print only the token")
	management := fs.Bool("management", false, "a management token (every scope, named \""+demoManagementName+"\") instead of a runtime token (named \""+demoRuntimeName+"\")")
	rotate := fs.Bool("rotate", false, "revoke demo-app's earlier tokens of the same name (and any named \""+demoLegacyName+"\"), so only the printed one of its kind works")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	// A concurrent demo may create the records first; that is fine.
	if err := createOrg(ctx, st, demoOrgID, demoOrgName); err != nil && !errors.Is(err, content.ErrConflict) {
		return err
	}
	if err := createApp(ctx, st, demoAppID, demoOrgID, demoAppName); err != nil && !errors.Is(err, content.ErrConflict) {
		return err
	}
	app, err := getApp(ctx, st, demoAppID)
	if err != nil {
		return err
	}
	name, scopes := demoRuntimeName, tenancy.RuntimeScopes
	if *management {
		name, scopes = demoManagementName, tenancy.AllScopes
	}
	tok, secret, err := createToken(ctx, st, tenancy.Token{OrganizationID: app.OrganizationID, AppID: app.ID, Name: name, Scopes: scopes})
	if err != nil {
		return err
	}
	// The new token is printed before older ones are revoked: if revoking
	// fails, the one that works is still known.
	printToken(c.stdout, tok, secret, *quiet)
	revoked := 0
	if *rotate {
		if revoked, err = revokeOtherDemoTokens(ctx, st, app.ID, tok); err != nil {
			return err
		}
	}
	if revoked > 0 && !*quiet {
		fmt.Fprintf(c.stdout, "Revoked %d earlier demo token(s).\n", revoked)
	}
	return nil
}

// revokeOtherDemoTokens revokes the app's active tokens named like keep,
// or as demo tokens were before they had scopes, except keep. Tokens
// named otherwise are someone's own and stay.
func revokeOtherDemoTokens(ctx context.Context, st content.Store, appID string, keep tenancy.Token) (int, error) {
	toks, err := st.ListTokens(ctx, tenancy.TokenFilter{AppID: appID})
	if err != nil {
		return 0, fmt.Errorf("list tokens of app %q: %w", appID, err)
	}
	n := 0
	now := time.Now().UTC()
	for _, t := range toks {
		if t.ID == keep.ID || (t.Name != keep.Name && t.Name != demoLegacyName) || t.Revoked() {
			continue
		}
		if err := st.RevokeToken(ctx, t.ID, now); err != nil {
			return n, fmt.Errorf("revoke earlier demo token %s: %w", t.ID, err)
		}
		n++
	}
	return n, nil
}

func migrate(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	// Opening the store applies pending migrations.
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	v, ok := st.(SchemaVersioner)
	if !ok {
		fmt.Fprintln(c.stdout, "Schema is up to date.")
		return nil
	}
	version, err := v.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	fmt.Fprintf(c.stdout, "Schema version %d.\n", version)
	return nil
}

func getOrg(ctx context.Context, st content.Store, id string) (tenancy.Organization, error) {
	org, err := st.Organization(ctx, id)
	if errors.Is(err, content.ErrNotFound) {
		return org, &userError{fmt.Sprintf("organization %q not found", id), err}
	}
	if err != nil {
		return org, fmt.Errorf("get organization %q: %w", id, err)
	}
	return org, nil
}

func getApp(ctx context.Context, st content.Store, id string) (tenancy.App, error) {
	app, err := st.App(ctx, id)
	if errors.Is(err, content.ErrNotFound) {
		return app, &userError{fmt.Sprintf("app %q not found", id), err}
	}
	if err != nil {
		return app, fmt.Errorf("get app %q: %w", id, err)
	}
	return app, nil
}

// idOrNew validates the ID flag, or fills it with a generated ID.
func idOrNew(flagName string, id *string, prefix string) error {
	if *id == "" {
		var err error
		*id, err = newID(prefix)
		return err
	}
	return checkID(flagName, *id)
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// writeTable prints rows aligned in columns. Cells are sanitized so a name
// holding tabs, newlines or escape sequences cannot break the layout.
func writeTable(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range rows {
		cells := make([]string, len(row))
		for i, cell := range row {
			cells[i] = cleanCell(cell)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

func cleanCell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}
