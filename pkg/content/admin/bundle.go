package admin

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/bundle"
	"github.com/assistantcms/cms/pkg/tenancy"
)

func importBundle(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	format := fs.String("format", "", "`json` or yaml (default: from the file name; json for -)")
	tokens := fs.Bool("tokens", false, "also create the access tokens the bundle holds (from export --tokens)")
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	path := fs.Arg(0)
	f, err := readBundle(path, *format)
	if err != nil {
		return err
	}
	// Tokens are credentials: a content bundle from an editor or a build
	// must not be able to add one by accident or design.
	if len(f.Bundle.Tokens) > 0 && !*tokens {
		return &userError{fmt.Sprintf("import %s: nothing was changed: the bundle holds %d access tokens; import them with --tokens", path, len(f.Bundle.Tokens)), nil}
	}
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	bar := newProgress(c.stderr, "importing", f.Bundle.Len())
	start := time.Now()
	stats, err := st.Import(ctx, &f.Bundle, bar.set)
	bar.done()
	if err != nil {
		// Nothing was written: the import is one transaction.
		return &userError{fmt.Sprintf("import %s: nothing was changed: %v", path, f.Explain(err)), err}
	}
	fmt.Fprintf(c.stdout, "imported %s in %s: %d created, %d updated, %d unchanged\n",
		path, time.Since(start).Round(time.Millisecond), stats.Created, stats.Updated, stats.Unchanged)
	if len(f.Bundle.Tokens) > 0 {
		ts, err := copyTokens(ctx, st, f.Bundle.Tokens)
		if err != nil {
			return &userError{fmt.Sprintf("import %s: the content is imported; tokens: %v (fix and import again: what is there is left alone)", path, err), err}
		}
		fmt.Fprintf(c.stdout, "tokens: %d created, %d revoked, %d unchanged\n", ts.created, ts.revoked, ts.unchanged)
	}
	return nil
}

type tokenStats struct{ created, revoked, unchanged int }

// copyTokens makes the store hold the given tokens, as moving to another
// database needs: missing ones are created, ones revoked in the bundle are
// revoked here too, and a token that exists with another hash or owner is
// an error, never overwritten. Running it again changes nothing.
func copyTokens(ctx context.Context, st content.Store, toks []tenancy.Token) (tokenStats, error) {
	var n tokenStats
	for _, t := range toks {
		have, err := st.Token(ctx, t.ID)
		switch {
		case errors.Is(err, content.ErrNotFound):
			if err := st.CreateToken(ctx, t); err != nil {
				return n, fmt.Errorf("token %s: %w", t.ID, err)
			}
			n.created++
			continue
		case err != nil:
			return n, fmt.Errorf("token %s: %w", t.ID, err)
		case !bytes.Equal(have.Hash, t.Hash) || have.OrganizationID != t.OrganizationID || have.AppID != t.AppID:
			return n, fmt.Errorf("token %s: exists with another secret or owner", t.ID)
		case t.Revoked() && !have.Revoked():
			if err := st.RevokeToken(ctx, t.ID, t.RevokedAt); err != nil {
				return n, fmt.Errorf("token %s: %w", t.ID, err)
			}
			n.revoked++
		default:
			n.unchanged++
		}
	}
	return n, nil
}

// readBundle reads and checks a bundle file; "-" is standard input.
func readBundle(path, format string) (*bundle.File, error) {
	f, err := parseFormat(format, path)
	if err != nil {
		return nil, err
	}
	var r io.Reader = os.Stdin
	if path != "-" {
		file, err := os.Open(path)
		if err != nil {
			return nil, &userError{fmt.Sprintf("open bundle: %v", err), err}
		}
		defer file.Close()
		r = file
	}
	b, err := bundle.Read(r, f)
	if err != nil {
		return nil, &userError{fmt.Sprintf("%s: nothing was changed: %v", path, err), err}
	}
	return b, nil
}

func parseFormat(format, path string) (bundle.Format, error) {
	switch strings.ToLower(format) {
	case "":
		return bundle.FormatOf(path), nil
	case "json":
		return bundle.JSON, nil
	case "yaml", "yml":
		return bundle.YAML, nil
	}
	return "", usagef("unknown format %q (json or yaml)", format)
}

func exportBundle(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	app := fs.String("app", "", "export only this app `ID`")
	org := fs.String("org", "", "export only this organization `ID` and its apps")
	out := fs.String("o", "-", "output `file` (- for standard output)")
	format := fs.String("format", "", "`json` or yaml (default: from the output file name; json for -)")
	tokens := fs.Bool("tokens", false, "include access tokens (their hashes, never secrets), to move to another database")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	f, err := parseFormat(*format, *out)
	if err != nil {
		return err
	}
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	if *app != "" {
		if _, err := getApp(ctx, st, *app); err != nil {
			return err
		}
	}
	if *org != "" {
		if _, err := getOrg(ctx, st, *org); err != nil {
			return err
		}
	}
	b, err := st.Export(ctx, content.ExportFilter{AppID: *app, OrganizationID: *org})
	if err != nil {
		return err
	}
	if *tokens {
		if b.Tokens, err = st.ListTokens(ctx, tenancy.TokenFilter{AppID: *app, OrganizationID: *org}); err != nil {
			return fmt.Errorf("export tokens: %w", err)
		}
	}
	if *out == "-" {
		return bundle.Write(c.stdout, b, f)
	}
	// Written beside the target and renamed, so a failed export never
	// leaves half a file under the name asked for.
	tmp, err := os.CreateTemp(dirOf(*out), ".export-*")
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := errors.Join(bundle.Write(tmp, b, f), tmp.Close()); err != nil {
		return fmt.Errorf("export: write %s: %w", *out, err)
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	fmt.Fprintf(c.stderr, "exported %d organizations, %d apps and %d records to %s\n", len(b.Organizations), len(b.Apps), len(b.Records), *out)
	return nil
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, os.PathSeparator); i >= 0 {
		return path[:i+1]
	}
	return "."
}

// progress draws a bar on a terminal; elsewhere it stays silent, so logs
// and pipes get no control characters.
type progress struct {
	w     io.Writer
	label string
	total int
	on    bool
	last  time.Time
}

func newProgress(w io.Writer, label string, total int) *progress {
	f, ok := w.(*os.File)
	on := false
	if ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			on = true
		}
	}
	return &progress{w: w, label: label, total: total, on: on && total > 0}
}

func (p *progress) set(done int) {
	if !p.on || (time.Since(p.last) < 100*time.Millisecond && done < p.total) {
		return
	}
	p.last = time.Now()
	const width = 30
	filled := width * min(done, p.total) / p.total
	fmt.Fprintf(p.w, "\r%s [%s%s] %d/%d", p.label, strings.Repeat("#", filled), strings.Repeat(" ", width-filled), done, p.total)
}

func (p *progress) done() {
	if p.on {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
