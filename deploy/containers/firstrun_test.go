package containers_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/demotraffic"
)

// The newcomer's machine: a container of freshImage with the repository
// as committed, on the host's network (the engine has no bridge), so the
// stack's ports are picked free on the host.
const (
	freshImage     = "cms-test/fresh:bookworm"
	freshContainer = "cms-test-fresh"
	// newcomer is the user without root of the image.
	newcomer     = "newcomer"
	newcomerHome = "/home/newcomer"
)

// readmeCommand is the README's first command; the test adds only the
// ports (the defaults may be taken on the host it shares the network
// with).
const readmeCommand = "go run ./deploy/local"

// TestFirstCommandOnAFreshMachine runs the README's first command on a
// fresh Debian bookworm with only the README's prerequisites (Go, git,
// CA certificates), first as root, which installs everything, then as a
// user without root on the machine root left, less WordNet and the
// model. Each time, with only what the stack printed: a handler is read,
// a question is answered by meaning (no word in common with its answer),
// and one turn of a runtime's events is sent and counted in ClickHouse;
// Ctrl-C then leaves no process behind.
func TestFirstCommandOnAFreshMachine(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 35*time.Minute)
	defer cancel()
	goImage := "golang:" + goVersion(t) + "-bookworm"
	start := time.Now()
	docker(ctx, t, "build", "--network", "host", "--quiet", "--build-arg", "GO_IMAGE="+goImage,
		"-t", freshImage, "testdata/fresh")
	t.Logf("image %s ready in %v", freshImage, time.Since(start).Round(time.Second))

	// The repository as committed: a clone of HEAD, whatever the work
	// tree holds besides.
	src := filepath.Join(t.TempDir(), "cms")
	if out, err := exec.CommandContext(ctx, "git", "clone", "--quiet", "--no-hardlinks", repoRoot, src).CombinedOutput(); err != nil {
		t.Fatalf("git clone %s: %v\n%s", repoRoot, err, out)
	}
	// Downloads and Go's build cache are kept between runs, as a mirror
	// and a developer's machine keep them: Go modules, Debian packages,
	// npm's cache, compiled packages. Nothing installed is kept.
	cache := freshCache(t)
	_, _ = engine.Run(ctx, "rm", "--force", freshContainer)
	docker(ctx, t, append([]string{"run", "--detach", "--name", freshContainer, "--network", "host",
		"--volume", src + ":/src",
		"--volume", filepath.Join(cache, "apt") + ":/var/cache/apt/archives",
		"--volume", filepath.Join(cache, "root-go") + ":/root/go/pkg/mod",
		"--volume", filepath.Join(cache, "root-npm") + ":/root/.npm",
		"--volume", filepath.Join(cache, "root-gobuild") + ":/root/.cache/go-build",
		"--volume", filepath.Join(cache, "user-go") + ":" + newcomerHome + "/go/pkg/mod",
		"--volume", filepath.Join(cache, "user-npm") + ":" + newcomerHome + "/.npm",
		"--volume", filepath.Join(cache, "user-gobuild") + ":" + newcomerHome + "/.cache/go-build",
	}, append(mirrorEnv(ctx, t), freshImage, "sleep", "infinity")...)...)
	t.Cleanup(func() {
		if _, err := engine.Run(context.Background(), "rm", "--force", freshContainer); err != nil {
			t.Errorf("remove %s: %v", freshContainer, err)
		}
	})
	// The user's own copy, made before root's run leaves anything in it.
	// The mounts made the directories above them as root.
	inFresh(ctx, t, "root", "cp -a /src "+newcomerHome+"/cms && chown -R newcomer: "+newcomerHome+"/cms && "+
		"chown newcomer: "+newcomerHome+"/go "+newcomerHome+"/go/pkg "+newcomerHome+"/.cache")

	t.Run("as root, everything installed", func(t *testing.T) {
		st := startFresh(ctx, t, "root", "/src")
		st.mustSay(t, `"msg":"search expands queries with WordNet"`)
		st.mustSay(t, `"msg":"ranking by meaning with the built-in sentence encoder","dir":"/usr/local/share/cms/encoder"`)
		st.mustNotSay(t, "stack: not installed")
		st.readHandler(ctx, t)
		st.answersByMeaning(ctx, t)
		st.countsATurn(ctx, t)
		st.interrupt(ctx, t)
	})
	if t.Failed() {
		return
	}

	// A machine where ClickHouse and npm are installed, as the README asks
	// of a user without root, and WordNet and the model are not.
	inFresh(ctx, t, "root", "apt-get remove -y -qq wordnet-base >/dev/null && rm -rf /usr/local/share/cms/encoder")
	t.Run("without root, the model in the user's cache and one line for WordNet", func(t *testing.T) {
		st := startFresh(ctx, t, newcomer, newcomerHome+"/cms")
		userModel := newcomerHome + "/.cache/cms/encoder"
		st.mustSay(t, `"msg":"ranking by meaning with the built-in sentence encoder","dir":"`+userModel+`"`)
		st.mustSay(t, `"msg":"no WordNet`)
		notice := "stack: not installed, it needs root: WordNet (search expands queries only with the apps' own synonyms); " +
			"install with sudo apt-get install -y wordnet-base and start the stack again"
		if n := strings.Count(st.output(), "not installed"); n != 1 || !strings.Contains(st.output(), notice+"\n") {
			t.Errorf("the stack said %d times what it could not install; want once, as %q", n, notice)
		}
		inFresh(ctx, t, newcomer, "test -f "+userModel+"/model.json")
		st.readHandler(ctx, t)
		st.answersByMeaning(ctx, t)
		st.countsATurn(ctx, t)
		st.interrupt(ctx, t)
	})
}

// goVersion is go.mod's go line, which names the golang stand-in.
func goVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go ([0-9.]+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	return string(m[1])
}

// freshCache is the directory of the downloads kept between runs.
func freshCache(t *testing.T) string {
	t.Helper()
	dir, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(dir, "cms-containers", "fresh")
	for _, d := range []string{"apt", "root-go", "root-npm", "root-gobuild", "user-go", "user-npm", "user-gobuild"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The user's caches belong to the user in the container: 1000, the
	// first user useradd makes there.
	for _, d := range []string{"user-go", "user-npm", "user-gobuild"} {
		if err := os.Chown(filepath.Join(dir, d), 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// mirrorEnv passes on where the host's Go and npm fetch from, however
// they were set (environment, go env -w, .npmrc), as a user behind a
// mirror or a proxy has them set, and the host's proxy variables:
// "--env" arguments of docker run.
func mirrorEnv(ctx context.Context, t *testing.T) []string {
	t.Helper()
	goVars := []string{"GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GONOPROXY", "GOINSECURE"}
	out, err := exec.CommandContext(ctx, "go", append([]string{"env"}, goVars...)...).Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	values := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(values) != len(goVars) {
		t.Fatalf("go env %v printed %q", goVars, out)
	}
	var args []string
	for i, name := range goVars {
		args = append(args, "--env", name+"="+values[i])
	}
	registry, err := exec.CommandContext(ctx, "npm", "config", "get", "registry").Output()
	if err != nil {
		t.Fatalf("npm config get registry: %v", err)
	}
	args = append(args, "--env", "npm_config_registry="+strings.TrimSpace(string(registry)))
	for _, name := range []string{"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"} {
		if v, ok := os.LookupEnv(name); ok {
			args = append(args, "--env", name+"="+v)
		}
	}
	return args
}

// inFresh runs a shell command in the fresh container as user, failing
// t with its output.
func inFresh(ctx context.Context, t *testing.T, user, script string) string {
	t.Helper()
	return docker(ctx, t, "exec", "--user", user, freshContainer, "bash", "-c", script)
}

// freshStack is the README's command running in the fresh container.
type freshStack struct {
	cmd  *exec.Cmd
	done chan struct{}
	// runErr and readErr are the command's end and its output's; set
	// before done is closed.
	runErr, readErr error

	mu  sync.Mutex
	out bytes.Buffer
	// pgid is the process group of go run and what it starts: Ctrl-C's.
	pgid int

	gateway, token, managementToken string
	clickhousePort                  string
}

var (
	pgidLine      = regexp.MustCompile(`(?m)^pgid (\d+)$`)
	gatewayLine   = regexp.MustCompile(`Clients use one address: (http://127\.0\.0\.1:\d+)`)
	runtimeLine   = regexp.MustCompile(`runtime token\s+(cms_\S+)`)
	managementRe  = regexp.MustCompile(`management token\s+(cms_\S+)`)
	clickhouseCmd = regexp.MustCompile(`clickhouse-client --port (\d+)`)
)

// startFresh runs the README's command as user in dir, in its own process
// group as a terminal runs a command, and waits until it says it is up.
func startFresh(ctx context.Context, t *testing.T, user, dir string) *freshStack {
	t.Helper()
	ports, err := childproc.FreePorts(10)
	if err != nil {
		t.Fatal(err)
	}
	command := strings.Fields(readmeCommand)
	for i, flag := range []string{"broker-port", "clickhouse-port", "ingest-port", "consumer-port", "api-port", "gateway-port",
		"ingest-operator-port", "consumer-operator-port", "api-operator-port", "gateway-operator-port"} {
		command = append(command, "-"+flag, strconv.Itoa(ports[i]))
	}
	home := "/root"
	if user != "root" {
		home = newcomerHome
	}
	// set -m: the command is a job of its own process group, as in an
	// interactive shell, so Ctrl-C is a SIGINT to that group.
	script := "set -m; " + strings.Join(command, " ") + " 2>&1 & echo pgid $!; wait $!"
	st := &freshStack{done: make(chan struct{})}
	// Cold, the command installs packages and compiles everything; far
	// longer means it hangs.
	upWithin := 20 * time.Minute
	st.cmd = engine.Command(ctx, "exec", "--user", user, "--workdir", dir, "--env", "HOME="+home, freshContainer, "bash", "-c", script)
	stdout, err := st.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	st.cmd.Stderr = st.cmd.Stdout
	started := time.Now()
	if err := st.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	up := make(chan struct{})
	go func() {
		defer close(st.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			st.mu.Lock()
			st.out.WriteString(sc.Text() + "\n")
			st.mu.Unlock()
			if strings.HasPrefix(sc.Text(), "Press Ctrl-C to stop everything.") {
				once.Do(func() { close(up) })
			}
		}
		st.readErr = sc.Err()
		_, _ = io.Copy(io.Discard, stdout)
		st.runErr = st.cmd.Wait()
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("what %s's command printed:\n%s", user, tail(st.output(), 12000))
		}
	})
	select {
	case <-up:
	case <-st.done:
		t.Fatalf("%s: %s ended before it said it was up (%v; reading its output: %v)", user, readmeCommand, st.runErr, st.readErr)
	case <-time.After(upWithin):
		t.Fatalf("%s: %s did not say it was up within %v", user, readmeCommand, upWithin)
	case <-ctx.Done():
		t.Fatalf("%s: %s did not say it was up: %v", user, readmeCommand, ctx.Err())
	}
	t.Logf("%s: %s up in %v", user, readmeCommand, time.Since(started).Round(time.Second))
	out := st.output()
	find := func(re *regexp.Regexp, what string) string {
		m := re.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s: the stack did not print %s", user, what)
		}
		return m[1]
	}
	st.pgid, _ = strconv.Atoi(find(pgidLine, "its process group"))
	st.gateway = find(gatewayLine, "the clients' address")
	st.token = find(runtimeLine, "a runtime token")
	st.managementToken = find(managementRe, "a management token")
	st.clickhousePort = find(clickhouseCmd, "how to query ClickHouse")
	return st
}

func (st *freshStack) output() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.out.String()
}

func (st *freshStack) mustSay(t *testing.T, s string) {
	t.Helper()
	if !strings.Contains(st.output(), s) {
		t.Errorf("the stack did not say %s", s)
	}
}

func (st *freshStack) mustNotSay(t *testing.T, s string) {
	t.Helper()
	if strings.Contains(st.output(), s) {
		t.Errorf("the stack said %q", s)
	}
}

// call makes a request to the clients' address with the runtime token.
func (st *freshStack) call(ctx context.Context, t *testing.T, method, path string, body []byte, v any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, st.gateway+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+st.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, tail(string(b), 500))
	}
}

func (st *freshStack) readHandler(ctx context.Context, t *testing.T) {
	t.Helper()
	var got struct {
		Handler struct {
			IntentID string `json:"intentId"`
		} `json:"handler"`
	}
	st.call(ctx, t, http.MethodGet, "/cms/handler/OpeningHours", nil, &got)
	if got.Handler.IntentID != "OpeningHours" {
		t.Errorf("GET /cms/handler/OpeningHours: handler %q", got.Handler.IntentID)
	}
}

// answersByMeaning asks FAQ questions of the demo content that share no
// word with the FAQ that answers them: words alone find nothing for
// them.
func (st *freshStack) answersByMeaning(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, tc := range []struct{ question, faq string }{
		{"puncture", "Walk-in repairs"},
		{"borrowing money", "Finance"},
	} {
		var got struct {
			FAQ []struct {
				Name      string   `json:"name"`
				Questions []string `json:"questions"`
				Answer    string   `json:"answer"`
			} `json:"faq"`
		}
		st.call(ctx, t, http.MethodGet, "/cms/faq/query?size=1&question="+url.QueryEscape(tc.question), nil, &got)
		if len(got.FAQ) == 0 || got.FAQ[0].Name != tc.faq {
			t.Errorf("FAQ for %q: %+v, want %q", tc.question, got.FAQ, tc.faq)
			continue
		}
		f := got.FAQ[0]
		if w := sharedWords(tc.question, f.Name+" "+strings.Join(f.Questions, " ")+" "+f.Answer); len(w) > 0 {
			t.Errorf("%q shares %q with the FAQ %q: not a question only meaning answers", tc.question, w, tc.faq)
		}
	}
}

// word is a word of a question or an FAQ.
var word = regexp.MustCompile(`[\pL\pN]+`)

// sharedWords are the words of a found in b, in any case.
func sharedWords(a, b string) []string {
	in := map[string]bool{}
	for _, w := range word.FindAllString(strings.ToLower(b), -1) {
		in[w] = true
	}
	var shared []string
	for _, w := range word.FindAllString(strings.ToLower(a), -1) {
		if in[w] {
			shared = append(shared, w)
		}
	}
	return shared
}

// countsATurn sends one turn of a runtime's events with the runtime token
// and waits until ClickHouse counts them, asked as the stack says.
func (st *freshStack) countsATurn(ctx context.Context, t *testing.T) {
	t.Helper()
	session := fmt.Sprintf("fresh-%d", time.Now().UnixNano())
	events := demotraffic.AnsweredTurn(session, "newcomer", "web",
		demotraffic.Turn{Intent: "OpeningHours", Query: "when are you open", Answer: "We are open from nine to six."}, time.Now())
	body, err := json.Marshal(map[string]any{"events": events})
	if err != nil {
		t.Fatal(err)
	}
	var answer struct{ Accepted, Rejected int }
	st.call(ctx, t, http.MethodPut, "/cms/app/events", body, &answer)
	if answer.Accepted != len(events) || answer.Rejected != 0 {
		t.Fatalf("PUT /cms/app/events: %d accepted, %d rejected of %d", answer.Accepted, answer.Rejected, len(events))
	}
	query := "SELECT count() FROM events WHERE session_id = '" + session + "'"
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := engine.Run(ctx, "exec", freshContainer, "clickhouse-client", "--port", st.clickhousePort, "-q", query)
		if err == nil && strings.TrimSpace(out) == strconv.Itoa(len(events)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ClickHouse did not count the %d events of session %s within 2 minutes: %q, %v", len(events), session, out, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// interrupt presses Ctrl-C: SIGINT to the command's process group. The
// command must end at once and cleanly, and leave no process behind in
// the container but its sleeping first one.
func (st *freshStack) interrupt(ctx context.Context, t *testing.T) {
	t.Helper()
	docker(ctx, t, "exec", freshContainer, "bash", "-c", "kill -INT -- -"+strconv.Itoa(st.pgid))
	select {
	case <-st.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the stack had not stopped 2 minutes after Ctrl-C")
	}
	// go run ends with status 1 after an interrupt whatever the program
	// did (its idle build workers see the signal), so the stack's own
	// last word says whether it stopped everything.
	var exit *exec.ExitError
	if st.runErr != nil && (!errors.As(st.runErr, &exit) || exit.ExitCode() != 1) {
		t.Errorf("after Ctrl-C the command exited with %v", st.runErr)
	}
	st.mustSay(t, `msg="stopped everything"`)
	for _, l := range lines(st.output()) {
		if strings.HasPrefix(l, "stack: ") && !strings.HasPrefix(l, "stack: not installed") {
			t.Errorf("the stack failed: %s", l)
		}
	}
	// Every process but the container's first and this shell, zombies
	// included (PID 1 reaps no orphan), read from /proc without starting
	// another: "pid (name) state ...".
	left := docker(ctx, t, "exec", freshContainer, "bash", "-c",
		`for p in /proc/[0-9]*; do id=${p#/proc/}; [ "$id" = 1 ] || [ "$id" = $$ ] && continue; `+
			`read -r stat < "$p/stat" 2>/dev/null && echo "$stat"; done`)
	if l := lines(left); len(l) > 0 {
		t.Errorf("processes left after Ctrl-C: %q", l)
	}
}
