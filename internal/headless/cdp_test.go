package headless

import (
	"bytes"
	"image/png"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestPageDrivenOverThePipe types into a page and presses its button as a
// person would, reads what the page's script made of it, and takes a
// picture of the window's size.
func TestPageDrivenOverThePipe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			_, _ = w.Write([]byte(`<!doctype html><input id="in"><button id="go">Go</button><p id="out"></p><script src="/s.js"></script>`))
		case "/s.js":
			w.Header().Set("Content-Type", "text/javascript")
			_, _ = w.Write([]byte(`document.getElementById("go").onclick = () => { document.getElementById("out").textContent = "got " + document.getElementById("in").value; };`))
		}
	}))
	defer srv.Close()
	p := Open(t.Context(), t, srv.URL+"/", 640, 480)
	p.MustEval(`document.getElementById("in").value = "<b>x</b>"; document.getElementById("go").click()`, nil)
	p.WaitFor(`document.getElementById("out").textContent === "got <b>x</b>"`, 10*time.Second)
	var bold int
	p.MustEval(`document.querySelectorAll("b").length`, &bold)
	if bold != 0 {
		t.Errorf("%d <b> elements: text became markup", bold)
	}
	img, err := png.Decode(bytes.NewReader(p.Screenshot()))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 640 || b.Dy() != 480 {
		t.Errorf("screenshot %v, want 640x480", b)
	}
}
