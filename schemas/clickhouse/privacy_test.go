package clickhouse

import (
	"context"
	"fmt"
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
	"jo@localhost",
	"jane dot doe at gmail dot com",
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
	// URLs and hosts.
	"see https://shop.example/p?id=1",
	"ftp://files",
	"go to www.shop",
	"is example.org down",
	"mail.google.com",
	// Street addresses, with a name or not.
	"jane doe 12 baker street",
	"i live at 221b baker st london",
	"deliver to 10 downing st",
	"my address is 5 main road springfield",
	"send it to 1600 pennsylvania avenue nw",
	"42 wallaby way sydney lane",
	"parcel for 7 rue de la paix",
	"i live at the old mill",
	"hauptstr 12 berlin",
	"lindenweg 3a",
	// Dates of birth and other dates with a year.
	"born on 12/03/1985",
	"dob 1985-03-12",
	"my date of birth is 12.03.85",
	"i was born in 1990",
	"my birthday is the 3rd of march",
	"birthdate: 3 march 1990",
	"booking for 3rd of march 1990",
	"appointment on march 3, 1990",
	"12-3-85 is when i signed up",
	// Names given as such, and other details.
	"my name is jane doe",
	"hi my name's jane",
	"my full name is jane doe",
	"i'm called jane",
	"this is jane speaking",
	"my phone number is seven seven seven",
	"my postcode is sw1a 1aa",
	"my surname was smith",
}

// ordinaryQueries are questions anyone may ask; none may match
// PrivatePattern, or it would keep them from being suggested.
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
	sql := "SELECT q, match(q, " + quoteString(PrivatePattern) + ") FROM (SELECT arrayJoin([" + strings.Join(values, ", ") + "]) AS q)"
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
		if n := len(privateQueries) + len(ordinaryQueries); len(got) < n-1 { // "call me maybe" aside, all distinct
			t.Errorf("%d answers for %d queries", len(got), n)
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
