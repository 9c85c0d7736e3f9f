// Package admin is the administration command line of the api binary:
// organizations, apps and access tokens in the content database.
package admin

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// Exit codes returned by Run.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// SchemaVersioner is implemented by stores with a versioned schema; the
// migrate command reports the version through it.
type SchemaVersioner interface {
	SchemaVersion(ctx context.Context) (int, error)
}

// Run executes the admin command in args (without the program name) and
// returns the process exit code. It calls open only for commands that need
// the database, so help and usage errors never create a file.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, open func(ctx context.Context) (content.Store, error)) int {
	c := &cli{stdout: stdout, stderr: stderr, open: open}
	code := c.run(ctx, args)
	if c.store != nil {
		if err := c.store.Close(); err != nil {
			fmt.Fprintf(stderr, "error: %v\n", err)
			if code == ExitOK {
				code = ExitFailure
			}
		}
	}
	return code
}

// cli carries the state of one Run.
type cli struct {
	stdout, stderr io.Writer
	open           func(ctx context.Context) (content.Store, error)
	store          content.Store
	// flagOut receives flag errors and command usage; stderr unless set.
	flagOut io.Writer
}

// command is one leaf of the command tree, such as "token create".
type command struct {
	name    string // words that select it, e.g. "token create"
	args    string // synopsis of its flags and arguments
	summary string
	run     func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error
}

func commands() []command {
	return []command{
		{"org create", "--name NAME [--id ID]", "create an organization and print its id", orgCreate},
		{"org list", "[--json]", "list organizations", orgList},
		{"app create", "--org ORGID --name NAME [--id ID]", "create an app and print its id", appCreate},
		{"app list", "[--org ORGID] [--json]", "list apps, of one organization or all", appList},
		{"token create", "(--app APPID | --org ORGID) [--runtime | --management | --scopes LIST] [--name DESC] [--quiet]", "create an access token and print it once (a runtime token unless told otherwise)", tokenCreate},
		{"token list", "[--app APPID] [--org ORGID] [--json]", "list tokens (never their secrets)", tokenList},
		{"token revoke", "ID", "revoke a token by id (or by the token itself)", tokenRevoke},
		{"demo", "[--management] [--quiet] [--rotate]", "ensure demo-org and demo-app exist and print a new demo-app token (a runtime token; with --management, one that also writes content)", demo},
		{"import", "[--format json|yaml] [--tokens] FILE", "upsert a content bundle (organizations, apps, intents, handlers, entities, FAQs, documents) in one transaction", importBundle},
		{"export", "[--app APPID | --org ORGID] [-o FILE] [--format json|yaml] [--tokens]", "write content (and with --tokens, access tokens' hashes) as a bundle that import reads back", exportBundle},
		{"history revisions", "--app APPID --kind KIND --id ID [--before REVISION] [--limit N] [--json]", "list a record's revisions, newest first", historyRevisions},
		{"history diff", "--app APPID --kind KIND --id ID --from REVISION --to REVISION", "show the fields that differ between two revisions of a record", historyDiff},
		{"history audit", "--app APPID [--from TIME] [--to TIME] [--token ID] [--user USER] [--operation OP] [--kind KIND --id ID] [--limit N] [--json]", "list the app's audit log, newest first", historyAudit},
		{"history restore", "--app APPID --kind KIND --id ID --revision REVISION [--if-revision REVISION]", "make a record what it was at a revision, as a new change", historyRestore},
		{"history restore-app", "--app APPID --at TIME", "make an app and all its records what they were at a time, in one change", historyRestoreApp},
		{"history prune", "[--older-than AGE] [--keep N]", "delete revisions and audit entries older than AGE (90 days), each record's newest N (10) aside", historyPrune},
		{"migrate", "", "apply pending schema migrations and print the schema version", migrate},
	}
}

// usageError is a mistake in the command line; Run exits with ExitUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// userError reads well on a terminal while keeping the store's error in the
// chain for errors.Is.
type userError struct {
	msg string
	err error
}

func (e *userError) Error() string { return e.msg }
func (e *userError) Unwrap() error { return e.err }

func (c *cli) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		c.usage(c.stderr)
		return ExitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			if _, _, ok := lookup(args[1:]); ok {
				// "help token create" shows that command's flags, on stdout
				// as asked for rather than on stderr as after a mistake.
				c.flagOut = c.stdout
				return c.run(ctx, append(slices.Clone(args[1:]), "-h"))
			}
			if group := groupCommands(args[1]); len(group) > 0 && len(args) == 2 {
				writeCommands(c.stdout, group)
				return ExitOK
			}
			fmt.Fprintf(c.stderr, "unknown command %q\n\n", strings.Join(args[1:], " "))
			c.usage(c.stderr)
			return ExitUsage
		}
		c.usage(c.stdout)
		return ExitOK
	}
	cmd, rest, ok := lookup(args)
	if !ok {
		if group := groupCommands(args[0]); len(group) > 0 {
			if len(args) == 1 {
				fmt.Fprintf(c.stderr, "%s: missing subcommand\n", args[0])
			} else {
				fmt.Fprintf(c.stderr, "%s: unknown subcommand %q\n", args[0], args[1])
			}
			writeCommands(c.stderr, group)
			return ExitUsage
		}
		fmt.Fprintf(c.stderr, "unknown command %q\n\n", args[0])
		c.usage(c.stderr)
		return ExitUsage
	}

	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(cmp.Or(c.flagOut, c.stderr))
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: api %s %s\n\n%s.\n", cmd.name, cmd.args, capitalize(cmd.summary))
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(fs.Output(), "\nFlags:")
			fs.PrintDefaults()
		}
	}
	// What a command changes is the local user's, in the audit log.
	ctx = tenancy.WithOperation(tenancy.WithActor(ctx, tenancy.Actor{LocalUser: localUser()}), cmd.name)
	err := cmd.run(ctx, c, fs, rest)
	var uerr *usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &uerr):
		fmt.Fprintf(c.stderr, "%s: %v\n", cmd.name, err)
		fs.Usage()
		return ExitUsage
	case errors.Is(err, errFlagParse):
		// The flag package has already reported it, with the usage.
		return ExitUsage
	default:
		fmt.Fprintf(c.stderr, "error: %v\n", err)
		return ExitFailure
	}
}

func lookup(args []string) (command, []string, bool) {
	for _, cmd := range commands() {
		words := strings.Fields(cmd.name)
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			return cmd, args[len(words):], true
		}
	}
	return command{}, nil, false
}

func groupCommands(group string) []command {
	var out []command
	for _, cmd := range commands() {
		if first, _, _ := strings.Cut(cmd.name, " "); first == group && strings.Contains(cmd.name, " ") {
			out = append(out, cmd)
		}
	}
	return out
}

func (c *cli) usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: api [global flags] <command> [flags]")
	fmt.Fprintln(w)
	writeCommands(w, commands())
	fmt.Fprintln(w, "  help [COMMAND]")
	fmt.Fprintln(w, "        show this help, or a command's flags")
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Flags take one or two dashes; put them before positional arguments.`)
}

func writeCommands(w io.Writer, cmds []command) {
	fmt.Fprintln(w, "Commands:")
	for _, cmd := range cmds {
		fmt.Fprintf(w, "  %s\n        %s\n", strings.TrimSpace(cmd.name+" "+cmd.args), cmd.summary)
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// errFlagParse marks a flag error the flag package has already printed.
var errFlagParse = errors.New("invalid flags")

// parse parses flags and checks the number of positional arguments.
func parse(fs *flag.FlagSet, args []string, positional int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errFlagParse, err)
	}
	switch {
	case fs.NArg() > positional:
		return usagef("unexpected argument %q", fs.Arg(positional))
	case fs.NArg() < positional:
		return usagef("missing argument")
	}
	return nil
}

// db opens the store on first use; Run closes it.
func (c *cli) db(ctx context.Context) (content.Store, error) {
	if c.store != nil {
		return c.store, nil
	}
	s, err := c.open(ctx)
	if err != nil {
		return nil, fmt.Errorf("open content database: %w", err)
	}
	c.store = s
	return s, nil
}

// maxIDLen bounds identifiers given on the command line.
const maxIDLen = 64

// checkID accepts identifiers that are safe in URLs, file names and logs:
// ASCII letters, digits, '-', '_' and '.', starting with a letter or digit.
func checkID(flagName, id string) error {
	if id == "" {
		return usagef("--%s must not be empty", flagName)
	}
	if len(id) > maxIDLen {
		return usagef("--%s %q is longer than %d characters", flagName, id, maxIDLen)
	}
	for i, r := range id {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || r != '-' && r != '_' && r != '.') {
			return usagef("--%s %q: use letters, digits, '-', '_' or '.', starting with a letter or digit", flagName, id)
		}
	}
	return nil
}

// newID returns prefix, a dash and 8 random lowercase hex digits.
func newID(prefix string) (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate %s id: %w", prefix, err)
	}
	return prefix + "-" + hex.EncodeToString(b[:]), nil
}

func requireFlag(name, value string) error {
	if strings.TrimSpace(value) == "" {
		return usagef("--%s is required", name)
	}
	return nil
}

// localUser names the operating system user running the command, for
// the audit log: the account's name, else $USER, else its user ID.
func localUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if name := os.Getenv("USER"); name != "" {
		return name
	}
	return "uid " + strconv.Itoa(os.Getuid())
}
