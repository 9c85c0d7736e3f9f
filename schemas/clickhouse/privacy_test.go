package clickhouse

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/internal/modernch"
)

// privateQueries hold personal data, as users type it, normalised; each
// must match PrivatePattern.
var privateQueries = []string{
	// Email addresses, written and spelled out.
	"my email is john.doe@example.com",
	"my email is jane@example.org, please update it",
	"jo@localhost",
	"jane dot doe at gmail dot com",
	"my email is jane dot doe at gmail dot com",
	"write to jane at example dot org",
	"jane.doe at gmail dot co dot uk",
	"jane [at] example [dot] com",
	"jane(at)example.org",
	"reach me jane doe at gmail",
	"mail me at jane underscore doe at hotmail",
	"my shop dot com is down",
	// Numbers: orders, cards, phones.
	"order 123456",
	"card 4111111111111111",
	"call me on +44 20 7946 0958",
	"555-123-4567",
	"(555) 123 4567",
	"my mobile is 07700 900123",
	"my number is 555 0199",
	"appelez le 06 12 34 56 78",
	"my ip is 192.168.1.20",
	"call me on oh seven seven double oh nine double oh one two three",
	// A number, a code or an address given as one's own, with its value.
	"my phone number is 555 123 4567",
	"my phone number is 555",
	"my phone number is seven seven seven",
	"my order number is #12345",
	"my account number is 12 34 56",
	"my postcode is sw1a 1aa",
	"my zip code is 90210",
	"my pin is 4321",
	"my address is 5 main road springfield",
	"my home address is flat 3, the old mill",
	// URLs and hosts.
	"see https://shop.example/p?id=1",
	"ftp://files",
	"go to www.shop",
	"is example.org down",
	"mail.google.com",
	// Street addresses, with a name or not.
	"jane doe 12 baker street",
	"i live at 12 baker street",
	"i live at 221b baker st london",
	"deliver to 10 downing st",
	"send it to 1600 pennsylvania avenue nw",
	"42 wallaby way sydney lane",
	"12 old kent road",
	"parcel for 7 rue de la paix",
	"i live at the old mill",
	"i live on baker street",
	"hauptstr 12 berlin",
	"lindenweg 3a",
	// Dates of birth and other dates with their year.
	"born on 12/03/1990",
	"born on 12/03/1985",
	"i was born on the 3rd of march",
	"dob 1985-03-12",
	"my date of birth is 12.03.85",
	"i was born in 1990",
	"my birthday is the 3rd of march",
	"my birthday is 3 march 1985",
	"my birthday is in may",
	"birthdate: 3 march 1990",
	"booking for 3rd of march 1990",
	"appointment on march 3, 1990",
	"12-3-85 is when i signed up",
	"1.2.1990",
	// Names given as such.
	"my name is jane doe",
	"hi my name's jane",
	"hi my name\u2019s jane",
	"my name's o'brien",
	"my full name is jane doe",
	"my name is ted",
	"my name is \u00e9mile zola",
	"my surname was smith",
	"my username is jdoe",
	"my name: jane doe",
	"i'm called jane",
	"i\u2019m called jane",
	"im called jane doe",
	"i am called jane",
	"this is jane speaking",
}

// ordinaryQueries are questions anyone may ask; none may match
// PrivatePattern, or it would keep them from being counted, suggested and
// listed as unanswered.
var ordinaryQueries = []string{
	"where is my order",
	"order 12345", // five digits: not long
	"opening hours on 24 december",
	"what's new? e.g. prices",
	"what are your opening hours",
	"how do i reset my password",
	"is the 5 o'clock train late",
	"how do i change my email address",
	"what is my order number",
	"can you call me back",
	"is the store open 24/7",
	"do you deliver to london",
	"what is the price of 2 pizzas",
	"where is the nearest store",
	"what's your address",
	"how do i update my address",
	"is it a 3 hour drive from the airport",
	"2 way radio",
	"top 10 things to do",
	"how do i get to 5th avenue",
	"is st patrick's day a holiday",
	"are you open on may 1",
	"what happened in march 2020",
	"version 2.1 release notes",
	"can i pay with my card",
	"when was the company born",
	"where was mozart born",
	"do you sell birthday cakes",
	"what is the name of the manager",
	"what is my account balance",
	"i am looking for a gift",
	"my package is late",
	"my number one question is about prices",
	"where do i find the dot matrix printer",
	"what are the 3 best ways to save",
	"call me maybe",
	"how much is 1/2 kg of apples",
	"book a table for 4 at 7 pm",
	"what is the weather at the beach",
	"is the 10 am show sold out",
	"who lives at the north pole",
	"my street is flooded, are you open",
	"is there parking on the main street",
	// Phones, emails, addresses and orders, without their values.
	"my phone is broken",
	"my phone is 2 years old, is it still under warranty",
	"my phone number is wrong on my account",
	"how do i change my phone number",
	"my mobile is not charging",
	"my order number is wrong",
	"my order number is missing from the email",
	"where do i find my order number",
	"my account number is not showing",
	"my email is not verified",
	"my email address is not working",
	"my email was changed without my permission",
	"my delivery address was wrong",
	"my address is wrong on the invoice",
	"can you deliver to a different address",
	"my postcode is not recognised",
	"i live on a farm, do you deliver",
	"i live at home, can i still order",
	// Names, without them.
	"my name is wrong on the invoice",
	"my name is not showing on my profile",
	"my name is spelt wrong",
	"my name is misspelled",
	"my name is missing from the booking",
	"my username is already taken",
	"i'm called by your sales team every day",
	"my date of birth is wrong on my account",
	"how do i change my date of birth",
	"it's my birthday, do i get a discount",
	"my birthday voucher is not working",
	"do you sell birthday cakes for 6 people",
	"i was born in the uk, can i order",
	// Versions, model numbers, sizes, prices, times and distances.
	"version 1.2.30",
	"ios 17.4.1 update broke the app",
	"firmware 2.10.15 release notes",
	"does the iphone 15 fit this case",
	"is the samsung galaxy s23 supported",
	"is the rtx 4090 in stock",
	"the 15 inch macbook pro",
	"do you have these shoes in size 42",
	"do you have sizes 8 10 12 14",
	"3 pack of socks in size 10-12",
	"a 55 inch tv for \u00a3499.99",
	"the 4k tv costs $1,299",
	"can i use a \u00a3500 gift card",
	"buy 2 get 1 free",
	"can i pay a 20% deposit",
	"are you open 9am-5pm on saturday",
	"are you open 10.00-18.00 on sunday",
	"is the store open until 17:30",
	"delivery takes 3-5 working days",
	"is 2 day shipping free",
	"can i return it within 30 days",
	"3 hour road trip",
	"a 2 lane road",
	"is there a shop 5 minutes from main street",
	"do you have 2 shops on oxford street",
	"is the 24 hour store on main street open",
	"what's the size of the 2 seater sofa",
}

func TestIsPrivate(t *testing.T) {
	for _, q := range privateQueries {
		if !IsPrivate(q) {
			t.Errorf("IsPrivate(%q) = false, want true", q)
		}
	}
	for _, q := range ordinaryQueries {
		if IsPrivate(q) {
			t.Errorf("IsPrivate(%q) = true, want false: %q", q, privateQuery.FindString(q))
		}
	}
	// A query too long to suggest is refused unread, at once: a megabyte
	// would take the pattern seconds.
	long := strings.Repeat("where is my order ", 60_000)
	start := time.Now()
	if !IsPrivate(long) || IsPrivate(long[:MaxCheckedQuery-1]) {
		t.Errorf("IsPrivate of %d and %d bytes of an ordinary question", len(long), MaxCheckedQuery-1)
	}
	// Read by the pattern, it would take seconds; refused unread, it
	// takes microseconds. A second is a bound a loaded machine keeps.
	if took := time.Since(start); took > time.Second {
		t.Errorf("IsPrivate of a long query took %s", took)
	}
}

// TestEveryAlternativeIsTested checks that each alternative of
// PrivatePattern refuses at least one of privateQueries, so that the
// ClickHouse engines are tested on every one of them, and none is left
// matching nothing.
func TestEveryAlternativeIsTested(t *testing.T) {
	for i, alt := range privateAlternatives() {
		re := regexp.MustCompile(`(?i)` + alt)
		tested := false
		for _, q := range privateQueries {
			tested = tested || re.MatchString(q)
		}
		if !tested {
			t.Errorf("alternative %d matches none of the private queries: %.200s", i, alt)
		}
	}
}

func TestNotWord(t *testing.T) {
	for _, tc := range []struct {
		excluded []string
		other    []string // words the pattern must match
		refused  []string // words beyond excluded it must not match
	}{
		{[]string{"a", "the", "not"}, []string{"b", "an", "th", "then", "theo", "no", "note", "jane", "z"}, nil},
		{[]string{"wrong*", "in", "incorrect*"}, []string{"wron", "wrang", "i", "inc", "inco", "incorrec", "ink", "jane"},
			[]string{"wrongly", "wrongness", "incorrectly"}},
		{[]string{"home"}, []string{"hom", "homes", "homer", "h", "ho", "mill", "the"}, nil},
		{[]string{"hour*", "hr", "hrs", "day", "days", "way*"}, []string{"hou", "h", "hrss", "da", "dayz", "wa", "baker", "wallaby"},
			[]string{"hours", "ways"}},
	} {
		re := regexp.MustCompile(`^` + notWord(tc.excluded...) + `$`)
		for _, w := range tc.excluded {
			if w = strings.TrimSuffix(w, "*"); re.MatchString(w) {
				t.Errorf("notWord(%q) matches %q", tc.excluded, w)
			}
		}
		for _, w := range tc.refused {
			if re.MatchString(w) {
				t.Errorf("notWord(%q) matches %q", tc.excluded, w)
			}
		}
		for _, w := range tc.other {
			if !re.MatchString(w) {
				t.Errorf("notWord(%q) does not match %q", tc.excluded, w)
			}
		}
		for _, w := range []string{"", "1", "a b", "-"} {
			if re.MatchString(w) && w != "" {
				t.Errorf("notWord(%q) matches %q, not a word", tc.excluded, w)
			}
		}
	}
}

// TestPrivatePatternInClickHouse runs PrivatePattern with match(), as the
// materialized views do, on a ClickHouse 18.16 server and on a ClickHouse
// 26 engine (chDB): each must decide every query as Go does.
func TestPrivatePatternInClickHouse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var values []string
	for _, q := range append(append([]string{}, privateQueries...), ordinaryQueries...) {
		values = append(values, quoteString(q))
	}
	sql := "SELECT q, match(q, " + quoteString(PrivatePattern()) + ") FROM (SELECT arrayJoin([" + strings.Join(values, ", ") + "]) AS q)"
	check := func(t *testing.T, got map[string]bool) {
		t.Helper()
		for _, q := range privateQueries {
			if !got[q] {
				t.Errorf("match(%q) = 0, want 1", q)
			}
		}
		for _, q := range ordinaryQueries {
			if got[q] {
				t.Errorf("match(%q) = 1, want 0", q)
			}
		}
		if len(got) != len(privateQueries)+len(ordinaryQueries) {
			t.Errorf("%d answers for %d queries", len(got), len(privateQueries)+len(ordinaryQueries))
		}
	}
	t.Run("18.16", func(t *testing.T) {
		srv := devclickhouse.StartForTest(t)
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		rows, err := conn.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string]bool{}
		for rows.Next() {
			var q string
			var m uint8
			if err := rows.Scan(&q, &m); err != nil {
				t.Fatal(err)
			}
			got[q] = m == 1
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		check(t, got)
	})
	t.Run("26.7", func(t *testing.T) {
		s := modernch.OpenForTest(t)
		res, err := s.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, row := range res.Rows {
			got[fmt.Sprint(row[0])] = fmt.Sprint(row[1]) == "1"
		}
		check(t, got)
	})
}
