package launch

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/envflag"
)

var testLimits = httpserve.Limits{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
	WriteTimeout: 40 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}

func define(env map[string]string, o Options) (*envflag.Set, *Flags) {
	fs := envflag.New(flag.NewFlagSet("svc", flag.ContinueOnError), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	fs.SetOutput(io.Discard)
	return fs, Define(fs, o)
}

func TestStart(t *testing.T) {
	base := Options{AddrEnv: "SVC_ADDR", Addr: ":8081", AddrHelp: "HTTP listen address", ShutdownTimeout: 10 * time.Second,
		ShutdownHelp: "time allowed to drain requests on SIGTERM", HTTP: testLimits}
	withCORS := base
	withCORS.CORS = true
	derived := base
	derived.HTTP.WriteTimeout = 0
	derived.WriteTimeoutRule = "the read timeout plus 5s"
	renamed := base
	renamed.FormerEnv = map[string]string{EnvReadTimeout: "READ_TIMEOUT", EnvIdleTimeout: "IDLE_TIMEOUT"}
	level := "warn"
	given := base
	given.LogLevel = &level

	cases := []struct {
		name     string
		opts     Options
		env      map[string]string
		args     []string
		want     func(s Settings) bool
		wantErr  string
		wantLogs []string
		noLogs   []string
	}{
		{name: "defaults", opts: base, want: func(s Settings) bool {
			return s.Addr == ":8081" && s.DebugAddr == "" && s.OperatorAddr == "127.0.0.1:0" && s.ShutdownTimeout == 10*time.Second && s.HTTP == testLimits && s.CORS == nil
		}},
		// Told so, the operator endpoints share the listen address.
		{name: "operator endpoints on the listen address", opts: base, env: map[string]string{"OPERATOR_ADDR": "listen"},
			want: func(s Settings) bool { return s.OperatorAddr == "" }},
		{name: "operator endpoints on the listen address, by flag", opts: base, args: []string{"-operator-addr", ""},
			want: func(s Settings) bool { return s.OperatorAddr == "" }},
		{name: "environment", opts: withCORS, env: map[string]string{"SVC_ADDR": "127.0.0.1:1", "DEBUG_ADDR": "127.0.0.1:2", "OPERATOR_ADDR": ":9090", "SHUTDOWN_TIMEOUT": "3s",
			"HTTP_READ_HEADER_TIMEOUT": "1s", "HTTP_READ_TIMEOUT": "2s", "HTTP_WRITE_TIMEOUT": "3s", "HTTP_IDLE_TIMEOUT": "4s",
			"HTTP_MAX_HEADER_BYTES": "4096", "CORS_ALLOWED_ORIGINS": "https://app.example.com"},
			want: func(s Settings) bool {
				return s.Addr == "127.0.0.1:1" && s.DebugAddr == "127.0.0.1:2" && s.OperatorAddr == ":9090" && s.ShutdownTimeout == 3*time.Second &&
					s.HTTP == httpserve.Limits{ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 3 * time.Second,
						IdleTimeout: 4 * time.Second, MaxHeaderBytes: 4096} &&
					s.CORS.Allows("https://app.example.com") && !s.CORS.Allows("https://other.example.com")
			}},
		{name: "flags", opts: base, args: []string{"-addr", ":9", "-operator-addr", "127.0.0.1:9", "-read-timeout", "7s", "-max-header-bytes", "2048"}, env: map[string]string{"HTTP_READ_TIMEOUT": "2s"},
			want: func(s Settings) bool {
				return s.Addr == ":9" && s.OperatorAddr == "127.0.0.1:9" && s.HTTP.ReadTimeout == 7*time.Second && s.HTTP.MaxHeaderBytes == 2048
			}},
		{name: "former names are read and warned of", opts: renamed, env: map[string]string{"READ_TIMEOUT": "2s", "HTTP_IDLE_TIMEOUT": "4s", "IDLE_TIMEOUT": "9s"},
			want: func(s Settings) bool {
				return s.HTTP.ReadTimeout == 2*time.Second && s.HTTP.IdleTimeout == 4*time.Second
			},
			wantLogs: []string{`"old":"READ_TIMEOUT","new":"HTTP_READ_TIMEOUT"`, `"old":"IDLE_TIMEOUT","new":"HTTP_IDLE_TIMEOUT"`, `"level":"WARN"`}},
		{name: "former names elsewhere are not read", opts: base, env: map[string]string{"READ_TIMEOUT": "2s"},
			want: func(s Settings) bool { return s.HTTP.ReadTimeout == 30*time.Second }, noLogs: []string{"READ_TIMEOUT"}},
		{name: "a zero write timeout left to the service", opts: derived, want: func(s Settings) bool { return s.HTTP.WriteTimeout == 0 }},
		{name: "a zero write timeout refused without a rule", opts: base, env: map[string]string{"HTTP_WRITE_TIMEOUT": "0s"}, wantErr: "-write-timeout 0s: must be positive"},
		{name: "a negative write timeout refused with a rule", opts: derived, args: []string{"-write-timeout", "-1s"}, wantErr: "-write-timeout -1s: must be positive"},
		{name: "no read limit refused", opts: base, args: []string{"-read-timeout", "0s"}, wantErr: "-read-timeout 0s: must be positive"},
		{name: "no header limit refused", opts: base, env: map[string]string{"HTTP_READ_HEADER_TIMEOUT": "-1s"}, wantErr: "-read-header-timeout -1s: must be positive"},
		{name: "no idle limit refused", opts: base, args: []string{"-idle-timeout", "0s"}, wantErr: "-idle-timeout 0s: must be positive"},
		{name: "tiny header limit refused", opts: base, env: map[string]string{"HTTP_MAX_HEADER_BYTES": "10"}, wantErr: "-max-header-bytes 10: must be at least 1024"},
		{name: "bad origin", opts: withCORS, env: map[string]string{"CORS_ALLOWED_ORIGINS": "app.example.com"}, wantErr: `-cors-allowed-origins (CORS_ALLOWED_ORIGINS): allowed origin "app.example.com": no scheme`},
		{name: "bad log level", opts: base, env: map[string]string{"LOG_LEVEL": "loud"}, wantErr: "log level"},
		{name: "log level given elsewhere", opts: given, env: map[string]string{"LOG_LEVEL": "loud"},
			want: func(s Settings) bool {
				return !s.Log.Enabled(context.Background(), -4) && s.Log.Enabled(context.Background(), 4)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs, f := define(tc.env, tc.opts)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			s, err := f.Start(&logs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Start = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.want(s) {
				t.Errorf("settings %+v", s)
			}
			// Every start names the build it runs, at info.
			start := `"msg":"starting","command":"svc","version":"dev"`
			if s.Log.Enabled(context.Background(), slog.LevelInfo) != strings.Contains(logs.String(), start) {
				t.Errorf("logs and %s disagree with the level:\n%s", start, logs.String())
			}
			for _, w := range tc.wantLogs {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("logs lack %s:\n%s", w, logs.String())
				}
			}
			for _, w := range tc.noLogs {
				if strings.Contains(logs.String(), w) {
					t.Errorf("logs name %s:\n%s", w, logs.String())
				}
			}
		})
	}
}

// TestFlagsDefined checks which flags a service gets, each naming its
// variable in the help.
func TestFlagsDefined(t *testing.T) {
	level := "info"
	for _, tc := range []struct {
		name   string
		opts   Options
		want   []string
		absent []string
	}{
		{"all", Options{AddrEnv: "SVC_ADDR", CORS: true, FormerEnv: map[string]string{EnvReadTimeout: "READ_TIMEOUT"}},
			[]string{"addr:SVC_ADDR", "debug-addr:DEBUG_ADDR", "shutdown-timeout:SHUTDOWN_TIMEOUT", "log-level:LOG_LEVEL",
				"read-header-timeout:HTTP_READ_HEADER_TIMEOUT", "read-timeout:HTTP_READ_TIMEOUT", "write-timeout:HTTP_WRITE_TIMEOUT",
				"idle-timeout:HTTP_IDLE_TIMEOUT", "max-header-bytes:HTTP_MAX_HEADER_BYTES", "cors-allowed-origins:CORS_ALLOWED_ORIGINS",
				"read-timeout:(formerly READ_TIMEOUT, deprecated)"}, nil},
		{"without CORS and log level", Options{AddrEnv: "SVC_ADDR", LogLevel: &level}, []string{"addr:SVC_ADDR"}, []string{"cors-allowed-origins", "log-level"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, _ := define(nil, tc.opts)
			for _, w := range tc.want {
				name, env, _ := strings.Cut(w, ":")
				f := fs.Lookup(name)
				if f == nil {
					t.Errorf("no -%s", name)
					continue
				}
				if !strings.Contains(f.Usage, env) {
					t.Errorf("-%s help %q lacks %q", name, f.Usage, env)
				}
			}
			for _, name := range tc.absent {
				if fs.Lookup(name) != nil {
					t.Errorf("-%s defined", name)
				}
			}
			// Help names each value by its kind: a back-quoted word in the
			// help would stand for it instead.
			fs.VisitAll(func(f *flag.Flag) {
				if name, _ := flag.UnquoteUsage(f); name != "" && name != "string" && name != "duration" && name != "int" {
					t.Errorf("-%s help names its value %q", f.Name, name)
				}
			})
		})
	}
}

// TestVersion checks -version: one line on stdout naming the binary, no
// start, even where the settings would not start it.
func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		name, fsName string
		env          map[string]string
		args         []string
		want         string // a prefix of the line; "" for a normal start
	}{
		{"a service", "ingest", nil, []string{"-version"}, "ingest dev (revision "},
		{"a subcommand prints its binary", "api serve", nil, []string{"-version"}, "api dev (revision "},
		{"bad settings do not matter", "consumer", map[string]string{"HTTP_READ_TIMEOUT": "0s"}, []string{"-version"}, "consumer dev (revision "},
		{"no variable sets it", "ingest", map[string]string{"VERSION": "true"}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := envflag.New(flag.NewFlagSet(tc.fsName, flag.ContinueOnError), func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			fs.SetOutput(io.Discard)
			f := Define(fs, Options{AddrEnv: "SVC_ADDR", ShutdownTimeout: time.Second, HTTP: testLimits})
			var out, logs bytes.Buffer
			f.stdout = &out
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			_, err := f.Start(&logs)
			if tc.want == "" {
				if err != nil || out.Len() > 0 {
					t.Errorf("Start = %v, printed %q; want a start", err, out.String())
				}
				return
			}
			if !errors.Is(err, ErrVersionPrinted) {
				t.Errorf("Start = %v, want ErrVersionPrinted", err)
			}
			if line := out.String(); !strings.HasPrefix(line, tc.want) || !strings.HasSuffix(line, ")\n") || strings.Count(line, "\n") != 1 {
				t.Errorf("printed %q, want one line starting %q", line, tc.want)
			}
			if logs.Len() > 0 {
				t.Errorf("logged %s with -version", logs.String())
			}
		})
	}
}

func TestSettingsServe(t *testing.T) {
	s := Settings{Addr: "127.0.0.1:0", Log: discardLogger()}
	served := false
	err := s.Serve(t.Context(), func(ctx context.Context, ln net.Listener) error {
		defer ln.Close()
		served = true
		srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		resp, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	if err != nil || !served {
		t.Errorf("Serve = %v, served %v", err, served)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s.Addr = ln.Addr().String()
	if err := s.Serve(t.Context(), func(context.Context, net.Listener) error { t.Error("served on a taken address"); return nil }); err == nil {
		t.Error("Serve on a taken address succeeded")
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestSettingsServeOperator(t *testing.T) {
	s := Settings{Addr: "127.0.0.1:0", OperatorAddr: "127.0.0.1:0", Log: discardLogger()}
	err := s.Serve(t.Context(), func(ctx context.Context, ln net.Listener) error {
		defer ln.Close()
		if op := httpserve.OperatorOf(ln); op == nil || op.Addr().String() == ln.Addr().String() {
			t.Errorf("operator listener %v beside %s", op, ln.Addr())
		}
		return nil
	})
	if err != nil {
		t.Errorf("Serve = %v", err)
	}
}
