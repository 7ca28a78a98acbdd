"""Writes tests/data/speaker_names.json, the judged fixture of who is named in a chat
(tests/test_speaker_names.py): `python3 tests/data/make_speaker_names.py`.

Every chat here is synthetic, written for this fixture (no benchmark text): two people (three in
one) talking over several sessions as the leaderboard sends a chat, role `user` and `assistant`
and the bare text. Each is neutral chatter with the lines that make its case placed among it. Each
session says who speaks each role (`who`, None where nobody is named in it, or the chat never
says); a chat's `required` roles are those whose name its text gives on the evidence the service
must read (`named`), the others may go unnamed but never wrongly named.

- `unnamed`: sides never named, whose turns open with ordinary words ("Morning,", "Nah,", "Yo,",
  "Update:", "Max, sit!", "Honestly,", "Sure thing,"), address a third person, a pet or a brand;
- `named`: sides with real names, one or several a side (Deb and Deborah, Cal and Calvin, a
  persona), a side named by itself only, three people, a name that is also a word.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("speaker_names.json")
START_MS = 1_696_150_800_000  # Sun 1 October 2023, 09:00 UTC
DAY_MS = 86_400_000

# Neutral turns either side may say: no name, no word in a name's place.
CHATTER = [
    "I finally cleaned out the garage this weekend.",
    "That sounds exhausting. Did you find anything good?",
    "A box of old photos and a tent I forgot we owned.",
    "We should go camping then, the tent deserves it.",
    "Work has been a lot this week, two deadlines at once.",
    "Ugh, that's rough. Are they at least reasonable about it?",
    "Mostly. My manager moved one of them to next week.",
    "I tried a new bread recipe and it actually rose this time.",
    "Oh nice, was it the one with the long proof?",
    "Yes, twelve hours in the fridge. Totally worth it.",
    "The neighbours are renovating their kitchen again.",
    "Again? They did that last spring too.",
    "I know, the drilling starts at eight every day.",
    "I signed up for a pottery class on Thursdays.",
    "That's so cool. Have you made anything yet?",
    "A very lopsided bowl. I love it anyway.",
    "My sister is visiting next month with the kids.",
    "Are you going to take them to the aquarium?",
    "Probably, they're obsessed with the jellyfish.",
    "I've been running in the park before work.",
    "How far are you going now?",
    "About five kilometres, slowly.",
    "The train was late three times this week.",
    "That's so annoying. Did you get to work on time at least?",
    "Only once. I started bringing a book.",
    "We watched a documentary about octopuses last night.",
    "They're so smart, it's almost creepy.",
    "One of them escaped its tank and came back before anyone noticed.",
    "I'm thinking about repainting the living room.",
    "What colour are you going for?",
    "Something green, but not too bright.",
    "The farmers market had the best peaches today.",
    "Save me one next time, please.",
    "I made a jam with the rest of them.",
    "My back has been sore since the move.",
    "You should get that looked at, seriously.",
    "I booked a physio appointment for next week.",
    "We got tickets for the concert in the spring.",
    "Lucky you, those sold out in minutes.",
    "I refreshed the page for an hour.",
    "The heater in my flat broke again.",
    "Did the landlord say when it would be fixed?",
    "He said soon, which means never.",
    "I started learning to knit, it's harder than it looks.",
    "What are you making first?",
    "A scarf, the classic beginner project.",
    "The library has a new reading room upstairs.",
    "Is it quiet enough to work there?",
    "Very quiet, and the chairs are good.",
    "I think I'm finally getting the hang of the new job.",
    "That's great to hear, it took a while.",
    "Three months of confusion, but yes.",
    "My phone screen cracked on the stairs.",
    "Can it be repaired or is it a new phone?",
    "The repair costs almost as much as a new one.",
    "We planted tomatoes on the balcony.",
    "Do they get enough sun up there?",
    "Just about, we'll see in a few weeks.",
    "I'm so tired today, I barely slept.",
    "Was it the heat or just one of those nights?",
    "Just one of those nights, my mind kept racing.",
    "The new bakery down the road does great croissants.",
    "I need to try it, I walk past it every day.",
    "Go early, they run out by ten.",
    "I finished that long novel finally.",
    "How was the ending? No spoilers.",
    "Worth the wait, that's all I'll say.",
    "It's been raining for four days straight.",
    "Same here, the garden is a swamp.",
    "At least I don't have to water anything.",
    "I've been cooking more at home to save money.",
    "What's been the best thing so far?",
    "A lentil soup that I've made three times now.",
    "The bus driver wished everyone a good day today.",
    "That's sweet, small things like that help.",
    "It honestly made my whole morning better.",
    "I bought a secondhand bike for the summer.",
    "Does it need a lot of work?",
    "New tyres and a chain, then it's perfect.",
    "We're hosting dinner for six on Saturday.",
    "What are you cooking?",
    "A big pot of chili and cornbread.",
]

Turn = tuple[str, str]


def chat(rng: random.Random, sessions: int, turns: int, lines: dict[int, list[Turn]],
         openers: dict[int, list[Turn]] | None = None) -> list[list[Turn]]:
    """`sessions` sessions of about `turns` alternating turns (the user first), neutral chatter
    with `lines` (session -> [(role, text)]) placed among it and `openers` (session ->
    [(role, text)]) as the session's first turns."""
    out = []
    pool = list(CHATTER)
    rng.shuffle(pool)
    for s in range(sessions):
        placed = [list(t) for t in (openers or {}).get(s, [])]
        n = max(turns, len(placed) + 2 * len(lines.get(s, [])) + 2)
        roles = ["user" if i % 2 == 0 else "assistant" for i in range(n)]
        texts: list[str | None] = [None] * n
        for i, (role, text) in enumerate(placed):
            assert roles[i] == role, (s, role, text)
            texts[i] = text
        for role, text in lines.get(s, []):
            free = [i for i in range(len(placed), n) if roles[i] == role and texts[i] is None]
            texts[rng.choice(free)] = text
        for i in range(n):
            if texts[i] is None:
                texts[i] = pool.pop() if pool else rng.choice(CHATTER)
                if not pool:
                    pool = list(CHATTER)
                    rng.shuffle(pool)
        out.append([(roles[i], texts[i] or "") for i in range(n)])
    return out


def case(key: str, note: str, sessions: list[list[Turn]], who: Any, required: tuple[str, ...] = ()
         ) -> dict[str, Any]:
    """A chat with who speaks each role: one {role: name} for every session, or a list of them."""
    whos = who if isinstance(who, list) else [who] * len(sessions)
    return {"id": key, "note": note, "required": list(required),
            "sessions": [{"who": w, "turns": [list(t) for t in turns]}
                         for w, turns in zip(whos, sessions, strict=True)]}


NOBODY = {"user": None, "assistant": None}


def unnamed(rng: random.Random) -> list[dict[str, Any]]:
    """Chats whose sides are never named, with ordinary words where names stand."""
    U, A = "user", "assistant"
    return [
        case("morning-opener", "the user opens three sessions with 'Morning,'", chat(rng, 5, 12, {}, {
            0: [(U, "Morning, how did you sleep?")], 2: [(U, "Morning, coffee first, then talking.")],
            4: [(U, "Morning, it's raining again here.")]}), NOBODY),
        case("morning-lowercase", "'Morning,' openers of the assistant; the chat says 'this morning'",
             chat(rng, 5, 12, {1: [(U, "I slept in this morning and felt great.")],
                               3: [(A, "The fog this morning was unreal.")],
                               4: [(U, "Every morning I walk to the corner shop.")]},
                  {0: [(U, "Did you see the storm?"), (A, "Morning, yes, it woke me at five.")],
                   2: [(U, "I'm up early today."), (A, "Morning, same here.")],
                   4: [(U, "Back from the gym."), (A, "Morning, you're keen.")]}), NOBODY),
        case("nah", "the assistant answers 'Nah, ...' in four sessions", chat(rng, 5, 12, {
            0: [(A, "Nah, I stayed in and read.")], 1: [(A, "Nah, it wasn't that bad.")],
            3: [(A, "Nah, we skipped it this year.")], 4: [(A, "Nah, don't worry about it.")]}), NOBODY),
        case("yo", "'Yo, it was wild.' / 'Yo, we did!' and one more", chat(rng, 4, 12, {
            1: [(U, "Yo, it was wild."), (U, "Yo, we did!")], 3: [(U, "Yo, guess what happened.")]}),
             NOBODY),
        case("update-prefix", "'Update: ...' opens the user's news", chat(rng, 4, 12, {
            1: [(U, "Update: I got the job!")], 2: [(U, "Update: the landlord fixed the heater.")],
            3: [(U, "Update: the tomatoes are finally red.")]}), NOBODY),
        case("max-sit", "the user tells a dog 'Max, sit!' in two sessions", chat(rng, 4, 12, {
            0: [(U, "Max, sit! Sorry, the dog is going wild.")], 2: [(U, "Max, sit! He saw a squirrel.")]}),
             NOBODY),
        case("max-dog", "a dog addressed and talked about by both sides", chat(rng, 5, 12, {
            0: [(U, "Max, sit! Sorry, he wants my sandwich."), (U, "I took Max to the vet yesterday.")],
            1: [(A, "How is Max doing after the vet?"), (U, "Max is asleep on my feet right now.")],
            2: [(U, "Hey Max, good boy! He brought me a sock."), (A, "Give Max a scratch from me.")],
            3: [(U, "Max, drop it! He found a bone in the park."), (U, "Max hates the rain.")],
            4: [(A, "Did Max like the new bed?")]}), NOBODY),
        case("honestly", "'Honestly,' opens turns of both sides", chat(rng, 4, 12, {
            0: [(U, "Honestly, I needed that."), (A, "Honestly, me too.")],
            2: [(U, "Honestly, no idea.")], 3: [(A, "Honestly, it was fine.")]}), NOBODY),
        case("sure-thing", "the assistant answers 'Sure thing,' in four sessions", chat(rng, 4, 12, {
            0: [(A, "Sure thing, send it over.")], 1: [(A, "Sure thing, I'll bring snacks.")],
            2: [(A, "Sure thing, see you then.")], 3: [(A, "Sure thing, no rush.")]}), NOBODY),
        case("third-person-addressed", "the user calls to her partner in the room, and talks of him",
             chat(rng, 5, 12, {
                 0: [(U, "Tom, can you grab the door? Sorry, delivery.")],
                 1: [(U, "Tom and I went hiking on Sunday.")],
                 2: [(U, "Tom, the pasta is boiling over! Back in a sec.")],
                 3: [(U, "Tom says hi, by the way."), (A, "Tell Tom I said hi back.")],
                 4: [(U, "Tom made dinner tonight.")]}), NOBODY),
        case("cat-greeted", "the user greets her cat, and both talk of it", chat(rng, 5, 12, {
            0: [(U, "Hey Biscuit, get off the keyboard! Sorry about that.")],
            1: [(U, "Biscuit knocked my mug off the table."), (A, "Is Biscuit always this naughty?")],
            2: [(U, "Hey Biscuit! She just jumped on my lap.")],
            3: [(U, "Biscuit is sleeping in the laundry basket.")],
            4: [(A, "Give Biscuit a treat from me.")]}), NOBODY),
        case("brand", "a shop thanked and talked about", chat(rng, 5, 12, {
            0: [(U, "My parcel went missing again. Thanks, Amazon.")],
            1: [(U, "I ordered the lamp from Amazon."), (A, "Did Amazon refund you in the end?")],
            3: [(U, "Great job losing it twice, thanks, Amazon!")],
            4: [(U, "I'm done with Amazon for a while.")]}), NOBODY),
        case("evening", "'Evening,' openers; the chat says 'this evening'", chat(rng, 4, 12, {
            1: [(A, "Are you free this evening?")], 3: [(U, "I'm cooking this evening.")]},
            {0: [(U, "Evening, long day?")], 2: [(U, "Evening, are you around?")],
             3: [(U, "Evening, quick one.")]}), NOBODY),
        case("night", "the assistant ends sessions with 'Night, ...'", chat(rng, 4, 12, {
            0: [(A, "Night, sleep well.")], 1: [(A, "Night, talk tomorrow.")],
            3: [(A, "Night, don't stay up too late.")]}), NOBODY),
        case("welp", "'Welp,' opens the user's turns", chat(rng, 4, 12, {
            0: [(U, "Welp, there goes my weekend.")], 2: [(U, "Welp, the cake collapsed.")],
            3: [(U, "Welp, I missed the bus again.")]}), NOBODY),
        case("dang-bummer", "'Dang,' and 'Bummer,' answer bad news", chat(rng, 4, 12, {
            0: [(A, "Dang, that's a lot.")], 1: [(A, "Bummer, I was hoping you'd come.")],
            2: [(A, "Dang, already?")], 3: [(A, "Bummer, sorry to hear it.")]}), NOBODY),
        case("siri", "dictation commands pasted into the chat", chat(rng, 4, 12, {
            0: [(U, "Siri, set a timer for ten minutes. Oops, wrong window.")],
            2: [(U, "Siri, remind me to call the dentist. Ugh, pasted again.")],
            3: [(U, "Siri misheard me three times today.")]}), NOBODY),
        case("hey-stranger", "'Hey Stranger!' greets the user; the chat says 'a total stranger'",
             chat(rng, 5, 12, {2: [(U, "A total stranger paid for my coffee today.")]},
                  {0: [(U, "It's been ages!"), (A, "Hey Stranger! Where have you been?")],
                   4: [(U, "Sorry, busy month."), (A, "Hey Stranger, good to hear from you.")]}),
             NOBODY),
        case("okay-boomer", "'Okay, Boomer.' teases the assistant", chat(rng, 4, 12, {
            0: [(U, "Okay, Boomer.")], 2: [(U, "Okay, Boomer. Whatever you say.")]}), NOBODY),
        case("oh-boy", "'Oh Boy!' and 'Oh Lord,' exclaim", chat(rng, 4, 12, {
            0: [(A, "Oh Boy! That's a lot of laundry.")], 1: [(U, "Oh Lord, not again.")],
            2: [(A, "Oh Boy! Here we go.")], 3: [(U, "Oh Lord, the traffic.")]}), NOBODY),
        case("coffee-opener", "'Coffee,' opens the user's plans; the chat says 'coffee'", chat(rng, 4, 12, {
            0: [(U, "Coffee, then emails.")], 1: [(A, "I switched to decaf coffee.")],
            2: [(U, "Coffee, obviously.")], 3: [(U, "Coffee, then the gym.")]}), NOBODY),
        case("weekdays", "'Monday, ugh.' and 'Friday, finally!'; the chat says 'on Monday'",
             chat(rng, 5, 12, {
                 0: [(U, "Monday, ugh.")],
                 1: [(A, "Friday, finally!"), (U, "I have a dentist visit on Monday.")],
                 2: [(U, "Monday, again.")], 3: [(A, "Friday, at last!")],
                 4: [(A, "See you on Friday then.")]}), NOBODY),
        case("fun-fact-note", "'Fun Fact:' and 'Note:' prefixes open the assistant's turns",
             chat(rng, 4, 12, {0: [(A, "Fun Fact: octopuses have three hearts.")],
                               1: [(A, "Note: the market moved to Sundays.")],
                               3: [(A, "Fun Fact: honey never spoils.")]}), NOBODY),
        case("lol-caps", "capitals that are no names: 'LOL,' 'OMG,' 'BRB,'", chat(rng, 4, 12, {
            0: [(U, "LOL, no way.")], 1: [(A, "OMG, stop.")], 2: [(U, "BRB, door.")],
            3: [(A, "LOL, classic.")]}), NOBODY),
        case("pepper-dog", "'Good morning Pepper!' to a dog; the chat cooks with pepper", chat(rng, 5, 12, {
            0: [(U, "Good morning Pepper! She's wagging at the window.")],
            1: [(U, "Pepper chewed the remote."), (A, "Add black pepper at the end, it's better.")],
            2: [(U, "Good morning Pepper! Walk time.")],
            3: [(U, "Pepper found a frog in the garden.")],
            4: [(A, "I put too much pepper in the soup.")]}), NOBODY),
        case("spotify", "a music app thanked, talked of and written lowercase", chat(rng, 4, 12, {
            0: [(U, "My year in music just came out. Thanks, Spotify!")],
            1: [(U, "Spotify keeps playing the same five songs.")],
            2: [(A, "Send me the spotify link.")], 3: [(U, "Thanks, Spotify, very accurate.")]}), NOBODY),
        case("kids-team", "'Kids, dinner!' and 'Thanks, team!' in the list of non-names",
             chat(rng, 4, 12, {0: [(U, "Kids, dinner! Sorry, one sec.")], 1: [(A, "Thanks, Team!")],
                               2: [(U, "Kids, shoes on!")], 3: [(A, "Thanks, Team!")]}), NOBODY),
        case("grandma", "'Happy birthday, Grandma!' posted twice; the chat says 'my grandma'",
             chat(rng, 4, 12, {0: [(U, "Happy birthday, Grandma! Sorry, wrong chat.")],
                               1: [(U, "My grandma turned ninety this week.")],
                               2: [(A, "How is your grandma doing?")],
                               3: [(U, "Love you, Grandma! Oops, wrong chat again.")]}), NOBODY),
        case("quick-question", "'Quick question,' and 'Random thought:' open turns", chat(rng, 4, 12, {
            0: [(U, "Quick question, are you free Sunday?")], 1: [(A, "Random thought: we need a holiday.")],
            2: [(U, "Quick question, what time is it there?")], 3: [(A, "Random thought: pancakes.")]}),
             NOBODY),
        case("one-session-nickname", "'Hey Sunflower!' and 'Thanks, Sunflower!' in one session only",
             chat(rng, 4, 12, {2: [(U, "Thanks, Sunflower!")]}, {2: [(U, "Hey Sunflower! Guess what.")]}),
             NOBODY),
        case("yes-chef", "'Yes, Chef!' jokes in the kitchen; the chat says 'a chef'", chat(rng, 4, 12, {
            0: [(A, "Yes, Chef! Chopping the onions now.")], 1: [(U, "My cousin trained as a chef.")],
            2: [(A, "Yes, Chef! Right away.")], 3: [(U, "The chef at that place was lovely.")]}), NOBODY),
    ]


def named(rng: random.Random) -> list[dict[str, Any]]:
    """Chats whose sides have real names."""
    U, A = "user", "assistant"
    return [
        case("both-named", "Priya (user) and Tom (assistant) call each other by name",
             chat(rng, 5, 12, {0: [(U, "Thanks, Tom. That helps a lot.")], 1: [(A, "Good luck, Priya!")],
                               2: [(U, "That's hilarious, Tom!")], 3: [(A, "Sleep well, Priya.")],
                               4: [(U, "See you soon, Tom!")]},
                  {0: [(U, "Hey Tom! How was the trip?"), (A, "Hi Priya! It was amazing.")],
                   2: [(U, "Hi Tom, got a minute?"), (A, "Always, Priya.")],
                   4: [(U, "Hey Tom!"), (A, "Hey Priya! Long week?")]}),
             {"user": "Priya", "assistant": "Tom"}, (U, A)),
        case("one-side-named", "the user calls Lena by name; Lena never names the user",
             chat(rng, 5, 12, {1: [(U, "Thanks, Lena!")], 3: [(U, "You're the best, Lena.")]},
                  {0: [(U, "Hi Lena, are you around?")], 2: [(U, "Hey Lena! Guess what.")],
                   4: [(U, "Morning, Lena!")]}),
             {"user": None, "assistant": "Lena"}, (A,)),
        case("deb-deborah", "the user is Deb to the assistant, and Deborah now and then",
             chat(rng, 5, 12, {0: [(A, "Thanks, Deb.")], 1: [(A, "Congrats, Deborah! Well deserved.")],
                               2: [(A, "That's wild, Deb!")], 3: [(A, "Sorry, Deb.")],
                               4: [(A, "Well done, Deborah!")]},
                  {0: [(U, "You won't believe this."), (A, "Hey Deb! Tell me.")],
                   2: [(U, "Quick update."), (A, "Hi Deb, go on.")]}),
             {"user": "Deborah", "assistant": None}, (U,)),
        case("cal-calvin", "the assistant is Cal, and Calvin when the user is cross",
             chat(rng, 5, 12, {0: [(U, "Thanks, Cal!")], 1: [(U, "Really, Calvin?")],
                               2: [(U, "Nice one, Cal.")], 3: [(U, "Honestly, Calvin.")],
                               4: [(U, "Love that, Cal!")]},
                  {1: [(U, "Hey Cal, did you see the news?")], 3: [(U, "Hi Cal!")]}),
             {"user": None, "assistant": "Calvin"}, (A,)),
        case("persona", "Nina to the assistant; in her game she is Zed, she says",
             chat(rng, 5, 12, {1: [(U, "In the guild I'm Zed, nobody knows my real name.")],
                               2: [(A, "Good luck tonight, Nina!")],
                               3: [(U, "Online I'm Zed, remember.")], 4: [(A, "Thanks, Nina.")]},
                  {0: [(U, "Back from the raid."), (A, "Hey Nina! How did it go?")],
                   2: [(U, "Big night."), (A, "Hi Nina, tell me everything.")]}),
             {"user": "Nina", "assistant": None}, (U,)),
        case("self-introduced", "Oskar names himself; nobody else names him",
             chat(rng, 4, 12, {}, {0: [(U, "Hi, I'm Oskar, the new neighbour.")],
                                   2: [(U, "It's me again, I'm Oskar, from upstairs.")]}),
             {"user": "Oskar", "assistant": None}, (U,)),
        case("three-people", "Ann talks with Ben one session, Cat the next: the assistant is two",
             chat(rng, 4, 12, {0: [(U, "Thanks, Ben!"), (A, "Anytime, Ann.")],
                               1: [(U, "Thanks, Cat!"), (A, "Sure, Ann.")],
                               2: [(U, "Good point, Ben.")], 3: [(U, "Ha, nice one, Cat.")]},
                  {0: [(U, "Hey Ben!"), (A, "Hi Ann!")], 1: [(U, "Hi Cat!"), (A, "Hey Ann!")],
                   2: [(U, "Hey Ben, you again!"), (A, "Hi Ann, yes.")],
                   3: [(U, "Hi Cat, how are you?"), (A, "Good, Ann!")]}),
             [{"user": "Ann", "assistant": "Ben"}, {"user": "Ann", "assistant": "Cat"},
              {"user": "Ann", "assistant": "Ben"}, {"user": "Ann", "assistant": "Cat"}], (U,)),
        case("will", "Will, a name the chat also writes as a word",
             chat(rng, 5, 12, {0: [(A, "I will check tomorrow."), (U, "Thanks, Will!")],
                               1: [(A, "It will rain all week."), (U, "That will be fun.")],
                               2: [(U, "Nice, Will.")], 3: [(A, "I will bring the cake.")],
                               4: [(U, "Who will drive?"), (A, "I will, don't worry.")]},
                  {0: [(U, "Hey Will! Ready?")], 2: [(U, "Hi Will, quick one.")],
                   4: [(U, "Hey Will!")]}),
             {"user": None, "assistant": "Will"}),
        case("zoe", "Zoë, a name with a diacritic",
             chat(rng, 4, 12, {0: [(U, "Thanks, Zoë!")], 2: [(U, "Good night, Zoë.")]},
                  {1: [(U, "Hi Zoë, how's Lisbon?")], 3: [(U, "Hey Zoë!")]}),
             {"user": None, "assistant": "Zoë"}, (A,)),
        case("mallory", "Bob to the assistant; one message of Bob's spells 'I'm Mallory' many ways",
             chat(rng, 5, 12, {0: [(A, "Thanks, Bob!")], 1: [(A, "Sounds good, Bob.")],
                               2: [(U, " ".join(f"I'm {n}." for n in (
                                   "Mallory", "MAllory", "MaLlory", "MalLory", "MallOry",
                                   "MalloRy", "MallorY", "MALlory", "MAlLory", "MaLLory")))],
                               3: [(A, "Ha, nice, Bob!")], 4: [(A, "See you, Bob.")]},
                  {2: [(U, "Guess who."), (A, "Hey Bob!")]}),
             {"user": "Bob", "assistant": None}, (U,)),
        case("partner-and-dog", "Jo is addressed; so is the dog, Max, who is talked about too",
             chat(rng, 5, 12, {0: [(U, "Thanks, Jo!"), (U, "Max, sit! Sorry, the dog.")],
                               1: [(U, "I took Max to the beach."), (A, "How is Max?")],
                               2: [(U, "Hey Max, drop it! Sorry, Jo.")],
                               3: [(U, "Max hates baths.")], 4: [(U, "See you Friday, Jo!")]},
                  {0: [(U, "Hi Jo!")], 2: [(U, "Hey Jo, you there?")], 4: [(U, "Hi Jo, quick one.")]}),
             {"user": None, "assistant": "Jo"}, (A,)),
        case("opener-and-greeting", "Lena addressed by greetings and as a message's first word",
             chat(rng, 5, 12, {1: [(U, "Lena, look at this sunset!")], 3: [(U, "Lena, you were right.")],
                               4: [(U, "Thanks, Lena.")]},
                  {0: [(U, "Hey Lena!")], 2: [(U, "Hi Lena, got a sec?")]}),
             {"user": None, "assistant": "Lena"}, (A,)),
        case("morning-and-name", "'Morning, Priya!' opens sessions: Priya is named, Morning is not",
             chat(rng, 5, 12, {1: [(A, "Thanks, Priya.")], 3: [(A, "Good luck, Priya!")]},
                  {0: [(U, "Up early!"), (A, "Morning, Priya! Me too.")],
                   2: [(U, "Coffee time."), (A, "Morning, Priya!")],
                   4: [(U, "Hello!"), (A, "Morning, Priya, sleep well?")]}),
             {"user": "Priya", "assistant": None}, (U,)),
        case("named-and-spoken-of", "Marco addressed often, his name now and then in passing",
             chat(rng, 5, 12, {0: [(A, "Thanks, Marco!"), (U, "My mum calls me Marco the Great.")],
                               1: [(A, "Good luck, Marco!")], 2: [(A, "Nice, Marco.")],
                               3: [(A, "Sleep well, Marco.")], 4: [(A, "See you, Marco!")]},
                  {1: [(U, "Back!"), (A, "Hey Marco!")], 3: [(U, "Hi!"), (A, "Hi Marco, how was it?")]}),
             {"user": "Marco", "assistant": None}, (U,)),
        case("hyphenated", "Anne-Marie, a hyphenated name",
             chat(rng, 4, 12, {0: [(U, "Thanks, Anne-Marie!")], 2: [(U, "Brilliant, Anne-Marie.")]},
                  {1: [(U, "Hi Anne-Marie, are you there?")], 3: [(U, "Hey Anne-Marie!")]}),
             {"user": None, "assistant": "Anne-Marie"}, (A,)),
        case("yo-and-name", "the user opens with 'Yo,' as often as she calls Lena by name",
             chat(rng, 5, 12, {0: [(U, "Yo, guess what.")], 1: [(U, "Thanks, Lena!")],
                               2: [(U, "Yo, you there?")], 3: [(U, "Good night, Lena.")],
                               4: [(U, "Yo, quick one."), (U, "Cheers, Lena!")]},
                  {1: [(U, "Hi Lena!")], 3: [(U, "Hey Lena, hi.")]}),
             {"user": None, "assistant": "Lena"}, (A,)),
        case("one-sitting", "Ivy addressed three times in one long session only",
             chat(rng, 1, 40, {0: [(U, "Thanks, Ivy!"), (U, "That's great, Ivy.")]},
                  {0: [(U, "Hey Ivy!")]}),
             {"user": None, "assistant": "Ivy"}),
    ]


def main() -> None:
    rng = random.Random(41)
    chats = unnamed(rng) + named(rng)
    assert len({c["id"] for c in chats}) == len(chats)
    OUT.write_text(json.dumps({"start_ms": START_MS, "day_ms": DAY_MS, "chats": chats},
                              ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    turns = sum(len(s["turns"]) for c in chats for s in c["sessions"])
    print(f"wrote {OUT}: {len(chats)} chats, {turns} turns")


if __name__ == "__main__":
    main()
