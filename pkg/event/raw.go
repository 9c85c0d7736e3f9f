package event

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// appendRawEvent copies an event object as it was sent, adding appId
// right after the opening brace when the event had none.
func appendRawEvent(dst, raw []byte, hasAppID bool, appID string) []byte {
	if hasAppID {
		return append(dst, raw...)
	}
	dst = append(dst, `{"appId":`...)
	dst = appendString(dst, []byte(appID))
	rest := skipWS(raw, 1)
	if raw[rest] != '}' {
		dst = append(dst, ',')
	}
	return append(dst, raw[rest:]...)
}
