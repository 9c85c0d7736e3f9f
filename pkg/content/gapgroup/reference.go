package gapgroup

// referenceQuestions are questions of every kind people ask assistants.
// Their mean vector is the direction questions share, which ByMeaning
// takes away before comparing wordings: alone for a few wordings, whose
// own mean would be mostly what tells them apart, and weighed with theirs
// as they grow. They are not the labelled wordings the tests measure with.
var referenceQuestions = []string{
	"what time do you close today", "is there a discount for students", "how do i change my delivery address",
	"where is the nearest branch", "can i pay with cash", "how long is the warranty", "do you ship overseas",
	"what is the status of my application", "how do i contact customer service", "can i speak to a person",
	"what documents do i need", "is the service down right now", "how much does the premium plan cost",
	"can i get an invoice", "do you have a loyalty programme", "how do i book an appointment",
	"what are the fees for late payment", "how do i update the app", "why is the website so slow",
	"do you deliver on sundays", "can i bring my children", "is there wifi", "how do i report a problem",
	"what is your refund policy for events", "where can i find the manual", "is this product in stock",
	"how do i sign up", "can i change my plan later", "how do i log out", "what languages do you support",
	"do you have gift cards", "how do i pay my fine", "where do i park", "can i cancel anytime",
	"what is included in the price", "how do i recycle batteries", "is breakfast included",
	"how far is the airport", "what is the minimum age", "can i use it offline", "how do i share my screen",
	"do you accept pets", "how do i apply for a job here", "where are you located", "do you offer financing",
	"how do i turn on notifications", "what happens if i miss a payment", "can i transfer my ticket",
	"is there a mobile app", "how do i print a receipt", "who do i talk to about billing", "are you hiring",
	"how do i find my order history", "what is the weather like", "tell me a joke", "thanks for your help",
	"can you help me", "i have a question", "what can you do", "how are you", "hello", "goodbye",
	"is it safe to use", "how do i connect my printer", "what are the side effects", "do you have parking for bikes",
	"when does the sale end", "can i try it for free", "how do i delete a file", "what does this error mean",
	"can i order by phone", "is the museum open on mondays", "how do i get a replacement", "what is the speed limit",
	"how do i renew my licence", "where do i vote", "can i get a receipt by email", "how do i make a complaint",
}
