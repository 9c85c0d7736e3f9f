package envflag

import (
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestEnvAndFlags(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string
		check   func(t *testing.T, s *string, n *int, d *time.Duration, b *bool, f *float64, i *int64)
	}{
		{"defaults", nil, nil, "", func(t *testing.T, s *string, n *int, d *time.Duration, b *bool, f *float64, i *int64) {
			if *s != "def" || *n != 7 || *d != time.Second || *b || *f != 1.5 || *i != 9 {
				t.Errorf("got %q %d %s %v %v %d", *s, *n, *d, *b, *f, *i)
			}
		}},
		{"environment", map[string]string{"S": "env", "N": "8", "D": "250ms", "B": "true", "F": "2.5", "I": "10"}, nil, "",
			func(t *testing.T, s *string, n *int, d *time.Duration, b *bool, f *float64, i *int64) {
				if *s != "env" || *n != 8 || *d != 250*time.Millisecond || !*b || *f != 2.5 || *i != 10 {
					t.Errorf("got %q %d %s %v %v %d", *s, *n, *d, *b, *f, *i)
				}
			}},
		{"flag wins", map[string]string{"S": "env", "N": "8"}, []string{"-s", "flag", "-n", "9"}, "",
			func(t *testing.T, s *string, n *int, d *time.Duration, b *bool, f *float64, i *int64) {
				if *s != "flag" || *n != 9 {
					t.Errorf("got %q %d", *s, *n)
				}
			}},
		{"blank env ignored", map[string]string{"S": "  "}, nil, "", func(t *testing.T, s *string, n *int, d *time.Duration, b *bool, f *float64, i *int64) {
			if *s != "def" {
				t.Errorf("got %q", *s)
			}
		}},
		{"bad int", map[string]string{"N": "eight"}, nil, `N="eight": not an integer`, nil},
		{"bad duration", map[string]string{"D": "5"}, nil, `D="5": not a duration`, nil},
		{"bad bool", map[string]string{"B": "yes please"}, nil, `B="yes please": not a boolean`, nil},
		{"bad flag", nil, []string{"-n", "x"}, "invalid value", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			set := New(fs, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			s := set.String("s", "S", "def", "a string")
			n := set.Int("n", "N", 7, "an int")
			d := set.Duration("d", "D", time.Second, "a duration")
			b := set.Bool("b", "B", false, "a bool")
			f := set.Float64("f", "F", 1.5, "a float")
			i := set.Int64("i", "I", 9, "an int64")
			err := set.Parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, s, n, d, b, f, i)
		})
	}
}

func TestUsageNamesEnv(t *testing.T) {
	set := New(flag.NewFlagSet("t", flag.ContinueOnError), func(string) (string, bool) { return "", false })
	set.String("addr", "INGEST_ADDR", ":8081", "listen address")
	if u := set.Lookup("addr").Usage; !strings.Contains(u, "env INGEST_ADDR") {
		t.Errorf("usage %q does not name the variable", u)
	}
}

func TestList(t *testing.T) {
	cases := map[string][]string{"": nil, "a": {"a"}, " a, b ,,c ": {"a", "b", "c"}}
	for in, want := range cases {
		got := List(in)
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("List(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSecretIsUsedButNeverShown(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"default", nil, nil, "cms.db"},
		{"from the environment", map[string]string{"CONTENT_DB": "postgres://u:s3cret@db/cms"}, nil, "postgres://u:s3cret@db/cms"},
		{"flag wins", map[string]string{"CONTENT_DB": "postgres://u:s3cret@db/cms"}, []string{"-content-db", "other.db"}, "other.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(flag.NewFlagSet("t", flag.ContinueOnError), func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			var help strings.Builder
			s.SetOutput(&help)
			v := s.Secret("content-db", "CONTENT_DB", "cms.db", "content database")
			if err := s.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if *v != tc.want {
				t.Errorf("value %q, want %q", *v, tc.want)
			}
			s.PrintDefaults()
			if strings.Contains(help.String(), "s3cret") || !strings.Contains(help.String(), `(default "cms.db")`) {
				t.Errorf("help shows %q", help.String())
			}
		})
	}
}

func TestAlias(t *testing.T) {
	cases := []struct {
		name      string
		env       map[string]string
		args      []string
		want      time.Duration
		wantErr   string
		wantDepr  []Deprecation
		wantWarns []string
	}{
		{name: "neither set", want: time.Second},
		{name: "new name", env: map[string]string{"HTTP_READ_TIMEOUT": "2s"}, want: 2 * time.Second},
		{name: "old name", env: map[string]string{"READ_TIMEOUT": "3s"}, want: 3 * time.Second,
			wantDepr:  []Deprecation{{Old: "READ_TIMEOUT", New: "HTTP_READ_TIMEOUT"}},
			wantWarns: []string{`old=READ_TIMEOUT new=HTTP_READ_TIMEOUT`, "set HTTP_READ_TIMEOUT instead of READ_TIMEOUT"}},
		{name: "both: the new name wins", env: map[string]string{"HTTP_READ_TIMEOUT": "2s", "READ_TIMEOUT": "3s"}, want: 2 * time.Second,
			wantDepr:  []Deprecation{{Old: "READ_TIMEOUT", New: "HTTP_READ_TIMEOUT", Ignored: true}},
			wantWarns: []string{`old=READ_TIMEOUT new=HTTP_READ_TIMEOUT`, "HTTP_READ_TIMEOUT is set too and wins"}},
		{name: "blank new name", env: map[string]string{"HTTP_READ_TIMEOUT": " ", "READ_TIMEOUT": "3s"}, want: 3 * time.Second,
			wantDepr: []Deprecation{{Old: "READ_TIMEOUT", New: "HTTP_READ_TIMEOUT"}}},
		{name: "flag wins over the old name", env: map[string]string{"READ_TIMEOUT": "3s"}, args: []string{"-read-timeout", "4s"}, want: 4 * time.Second,
			wantDepr: []Deprecation{{Old: "READ_TIMEOUT", New: "HTTP_READ_TIMEOUT"}}},
		{name: "bad value names the old variable", env: map[string]string{"READ_TIMEOUT": "soon"}, wantErr: `READ_TIMEOUT="soon": not a duration`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(flag.NewFlagSet("t", flag.ContinueOnError), func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			s.SetOutput(io.Discard)
			s.Alias("HTTP_READ_TIMEOUT", "READ_TIMEOUT")
			d := s.Duration("read-timeout", "HTTP_READ_TIMEOUT", time.Second, "read timeout")
			other := s.String("addr", "ADDR", ":1", "address")
			err := s.Parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *d != tc.want || *other != ":1" {
				t.Errorf("read-timeout %s, addr %q; want %s, :1", *d, *other, tc.want)
			}
			if got := s.Deprecations(); !slices.Equal(got, tc.wantDepr) {
				t.Errorf("deprecations %+v, want %+v", got, tc.wantDepr)
			}
			var logs strings.Builder
			s.LogDeprecations(slog.New(slog.NewTextHandler(&logs, nil)))
			if n := strings.Count(logs.String(), "level=WARN"); n != len(tc.wantDepr) {
				t.Errorf("%d warnings for %d deprecated names:\n%s", n, len(tc.wantDepr), logs.String())
			}
			for _, w := range tc.wantWarns {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("warnings lack %q:\n%s", w, logs.String())
				}
			}
		})
	}
}

func TestAliasUsage(t *testing.T) {
	s := New(flag.NewFlagSet("t", flag.ContinueOnError), func(string) (string, bool) { return "", false })
	s.Alias("HTTP_IDLE_TIMEOUT", "IDLE_TIMEOUT")
	s.Duration("idle-timeout", "HTTP_IDLE_TIMEOUT", time.Minute, "idle time")
	if u, want := s.Lookup("idle-timeout").Usage, "idle time (env HTTP_IDLE_TIMEOUT) (formerly IDLE_TIMEOUT, deprecated)"; u != want {
		t.Errorf("usage %q, want %q", u, want)
	}
}

func TestAliasAfterDefinitionPanics(t *testing.T) {
	s := New(flag.NewFlagSet("t", flag.ContinueOnError), func(string) (string, bool) { return "", false })
	s.Duration("idle-timeout", "HTTP_IDLE_TIMEOUT", time.Minute, "idle time")
	defer func() {
		if recover() == nil {
			t.Error("an alias declared after its flag was accepted; it could never be read")
		}
	}()
	s.Alias("HTTP_IDLE_TIMEOUT", "IDLE_TIMEOUT")
}

func TestSecretFromFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	withNewline := write("pass", "s3cret-file\n")
	withSpaces := write("spaced", "  s3cret inside  \r\n\t\n")
	empty := write("empty", "\n")
	unreadable := filepath.Join(dir, "sub")
	if err := os.Mkdir(unreadable, 0o700); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		want    string
		wantErr string
	}{
		{name: "neither set", want: "def"},
		{name: "the variable", env: map[string]string{"PASS": "s3cret-env"}, want: "s3cret-env"},
		{name: "the file, trailing newline dropped", env: map[string]string{"PASS_FILE": withNewline}, want: "s3cret-file"},
		{name: "only trailing white space dropped", env: map[string]string{"PASS_FILE": withSpaces}, want: "  s3cret inside"},
		{name: "blank variable leaves the file", env: map[string]string{"PASS": " ", "PASS_FILE": withNewline}, want: "s3cret-file"},
		{name: "blank file variable ignored", env: map[string]string{"PASS": "s3cret-env", "PASS_FILE": " "}, want: "s3cret-env"},
		{name: "flag wins over the file", env: map[string]string{"PASS_FILE": withNewline}, args: []string{"-pass", "s3cret-flag"}, want: "s3cret-flag"},
		{name: "both set", env: map[string]string{"PASS": "s3cret-env", "PASS_FILE": withNewline},
			wantErr: "PASS and PASS_FILE are both set; set only one of them"},
		{name: "missing file", env: map[string]string{"PASS_FILE": missing},
			wantErr: `PASS_FILE="` + missing + `": read the secret file: no such file or directory`},
		{name: "a directory", env: map[string]string{"PASS_FILE": unreadable},
			wantErr: `PASS_FILE="` + unreadable + `": read the secret file: is a directory`},
		{name: "empty file", env: map[string]string{"PASS_FILE": empty}, wantErr: `PASS_FILE="` + empty + `": the secret file is empty`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(flag.NewFlagSet("t", flag.ContinueOnError), func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			s.SetOutput(io.Discard)
			v := s.Secret("pass", "PASS", "def", "a password")
			err := s.Parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("the error shows the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *v != tc.want {
				t.Errorf("value %q, want %q", *v, tc.want)
			}
		})
	}
}

func TestSecretUsageNamesBothVariables(t *testing.T) {
	s := New(flag.NewFlagSet("t", flag.ContinueOnError), func(k string) (string, bool) { return "s3cret", k == "PASS" })
	var help strings.Builder
	s.SetOutput(&help)
	s.Secret("pass", "PASS", "", "a password")
	if u, want := s.Lookup("pass").Usage, "a password (env PASS or PASS_FILE)"; u != want {
		t.Errorf("usage %q, want %q", u, want)
	}
	s.PrintDefaults()
	if strings.Contains(help.String(), "s3cret") {
		t.Errorf("help shows the secret: %s", help.String())
	}
}
