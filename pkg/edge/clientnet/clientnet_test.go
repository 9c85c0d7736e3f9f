package clientnet

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	loopback, err := ParseTrusted("127.0.0.0/8,::1/128")
	if err != nil {
		t.Fatal(err)
	}
	gateway, err := ParseTrusted("127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	byDefault, err := ParseTrusted(DefaultTrusted)
	if err != nil {
		t.Fatal(err)
	}
	proxies, err := ParseTrusted("10.0.0.0/8, 192.0.2.1 ,fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		peer    string
		xff     []string
		trusted []netip.Prefix
		want    string
	}{
		{"a client, no proxy trusted", "203.0.113.9:5000", nil, nil, "203.0.113.0/24"},
		{"a client's own X-Forwarded-For is ignored", "203.0.113.9:5000", []string{"198.51.100.1"}, proxies, "203.0.113.0/24"},
		{"not trusted, so ignored", "127.0.0.1:5000", []string{"198.51.100.1"}, nil, "127.0.0.0/24"},
		{"the local gateway", "127.0.0.1:5000", []string{"198.51.100.7"}, loopback, "198.51.100.0/24"},
		{"a trusted peer without the header", "127.0.0.1:5000", nil, loopback, "127.0.0.0/24"},
		{"by default a loopback peer is not trusted", "127.0.0.1:5000", []string{"198.51.100.7"}, byDefault, "127.0.0.0/24"},
		{"by default IPv6 loopback is not trusted", "[::1]:5000", []string{"198.51.100.7"}, byDefault, "::/48"},
		{"the gateway's own source address", "127.0.0.2:5000", []string{"198.51.100.7"}, gateway, "198.51.100.0/24"},
		{"another local client than the gateway", "127.0.0.1:5000", []string{"198.51.100.7"}, gateway, "127.0.0.0/24"},
		{"the entry the proxy appended, not the client's", "10.1.2.3:5000", []string{"1.2.3.4, 198.51.100.7"}, proxies, "198.51.100.0/24"},
		{"through two proxies", "10.1.2.3:5000", []string{"1.2.3.4, 198.51.100.7, 192.0.2.1"}, proxies, "198.51.100.0/24"},
		{"over several header lines", "10.1.2.3:5000", []string{"1.2.3.4", "198.51.100.7", "10.9.9.9"}, proxies, "198.51.100.0/24"},
		{"a malformed entry stops the walk", "10.1.2.3:5000", []string{"198.51.100.7, nonsense, 192.0.2.1"}, proxies, "192.0.2.0/24"},
		{"every hop trusted", "10.1.2.3:5000", []string{"10.4.4.4"}, proxies, "10.4.4.0/24"},
		{"an entry with a port", "10.1.2.3:5000", []string{"198.51.100.7:4711"}, proxies, "198.51.100.0/24"},
		{"IPv6", "[2001:db8:1:2::5]:5000", nil, nil, "2001:db8:1::/48"},
		{"IPv6 through a proxy", "[fd00::1]:5000", []string{"[2001:db8:aa:bb::1]:99"}, proxies, "2001:db8:aa::/48"},
		{"IPv6 without brackets", "[fd00::1]:5000", []string{"2001:db8:aa:bb::1"}, proxies, "2001:db8:aa::/48"},
		{"IPv4 mapped in IPv6", "[::ffff:203.0.113.9]:5000", nil, nil, "203.0.113.0/24"},
		{"a zone", "[fe80::1%eth0]:5000", nil, nil, "fe80::/48"},
		{"no address", "", nil, proxies, ""},
		{"not an address", "pipe", nil, proxies, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tc.peer, Header: http.Header{}}
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := Of(r, tc.trusted); got != tc.want {
				t.Errorf("ClientNetwork = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseTrusted(t *testing.T) {
	got, err := ParseTrusted(" 10.1.2.3/8, ::1 , 192.0.2.1,")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmtPrefixes(got), "[10.0.0.0/8,::1/128,192.0.2.1/32]"; got != want {
		t.Errorf("parsed %s, want %s", got, want)
	}
	if got, err := ParseTrusted(""); err != nil || len(got) != 0 {
		t.Errorf("empty list: %v %v", got, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "localhost", "10.0.0.0/8,x"} {
		if _, err := ParseTrusted(bad); err == nil || !strings.Contains(err.Error(), "want a network such as 10.0.0.0/8 or an address") {
			t.Errorf("ParseTrusted(%q): %v", bad, err)
		}
	}
}

func fmtPrefixes(ps []netip.Prefix) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return "[" + strings.Join(s, ",") + "]"
}
