"""Word lists and chit-chat templates of the synthetic generator (data only, no logic).

Filler is generic on purpose: it never states a fact of the kinds the suites plant (who someone
is, where they live, codes, dates of events), so a planted fact has exactly one source. The
adversarial suite's topics (`ABSENT_TOPICS`) appear nowhere else.
"""

from __future__ import annotations

FIRST_NAMES = (
    "Priya", "Omar", "Lena", "Mateo", "Aiko", "Kwame", "Sofia", "Jonas", "Mei", "Ravi", "Elena",
    "Tariq", "Ingrid", "Diego", "Yuki", "Amara", "Felix", "Noor", "Hugo", "Zara", "Mira", "Karim",
    "Anya", "Tomas", "Leila", "Oscar", "Hana", "Emeka", "Clara", "Arjun", "Freya", "Malik",
    "Ines", "Viktor", "Sana", "Rafael", "Nadia", "Bruno", "Chloe", "Idris", "Greta", "Kenji",
    "Lucia", "Dmitri", "Aisha", "Emil", "Rosa", "Tobias", "Yara", "Nikolai", "Esme", "Hamza",
    "Julia", "Marco", "Signe", "Pablo", "Ayumi", "Daniel", "Farah", "Lars", "Maya", "Ibrahim",
    "Olga", "Sven", "Talia", "Wei", "Beatriz", "Finn", "Gabriela", "Henrik", "Isla", "Joon",
    "Kavya", "Luca", "Matilda", "Nils", "Petra", "Quentin", "Rania", "Stefan", "Thea", "Umar",
    "Vera", "Wanjiru", "Xavier", "Yusuf", "Adele", "Bilal", "Carmen", "Dario", "Elif", "Fatima",
    "Gustav", "Helga", "Ilya", "Jana", "Kofi", "Lotte", "Nora", "Otto", "Paloma", "Rohan",
    "Saoirse", "Teo", "Ulla", "Valentin", "Willa", "Ximena", "Yannick", "Zainab", "Astrid",
    "Benedikt", "Cosima", "Desmond", "Eero", "Florin", "Giulia", "Hassan", "Ivo", "Jorun",
)
SURNAMES = (
    "Okafor", "Lindqvist", "Tanaka", "Moreau", "Castillo", "Novak", "Haddad", "Kowalski",
    "Brennan", "Ferreira", "Nakamura", "Abara", "Petrov", "Johansson", "Rossi", "Mensah",
    "Dubois", "Kaur", "Schmidt", "Alvarez", "Varga", "Silva", "Horvat", "Iyer", "Bakker",
    "Larsen", "Mazur", "Quinn", "Osei", "Eriksen", "Marchetti", "Sato", "Delgado", "Fischer",
    "Achebe", "Romano", "Lund", "Costa", "Hughes", "Rahman",
)
CITIES = (
    "Berlin", "Munich", "Lisbon", "Porto", "Oslo", "Bergen", "Lyon", "Seville", "Valencia",
    "Krakow", "Gdansk", "Prague", "Vienna", "Zagreb", "Ljubljana", "Tallinn", "Riga", "Vilnius",
    "Helsinki", "Turku", "Dublin", "Galway", "Edinburgh", "Glasgow", "Leeds", "Bristol",
    "Cardiff", "Antwerp", "Ghent", "Rotterdam", "Utrecht", "Hamburg", "Leipzig", "Dresden",
    "Cologne", "Bologna", "Turin", "Naples", "Verona", "Marseille", "Nantes", "Bordeaux",
    "Toulouse", "Bilbao", "Granada", "Athens", "Thessaloniki", "Istanbul", "Nairobi", "Accra",
    "Lagos", "Tunis", "Montreal", "Toronto", "Vancouver", "Calgary", "Boston", "Denver",
    "Austin", "Seattle", "Portland", "Chicago", "Melbourne", "Perth", "Adelaide", "Auckland",
    "Wellington", "Osaka", "Kyoto", "Busan", "Taipei", "Hanoi", "Manila", "Santiago", "Lima",
    "Quito", "Bogota", "Montevideo",
)
COUNTRIES = (
    "Peru", "Chile", "Japan", "Morocco", "Iceland", "Vietnam", "Kenya", "Norway", "Portugal",
    "Mexico", "Greece", "Canada", "Georgia", "Jordan", "Thailand", "Croatia", "Scotland",
    "Argentina", "Egypt", "Ireland", "India", "Turkey", "Colombia", "Nepal",
)
COMPANIES = (
    "Northwind", "Brightline", "Kestrel Labs", "Orbisoft", "Tallgrass Media", "Bluepeak",
    "Harbor Analytics", "Quillworks", "Redfern Logistics", "Sunmill", "Ironbark Systems",
    "Lumen Health", "Copperleaf", "Meridian Foods", "Vantage Rail", "Pinecrest Bank",
    "Stratus Air", "Tidewater Energy", "Glimmer Games", "Foxglove Studio", "Alder Robotics",
    "Marlow Insurance", "Greyhaven Press", "Solace Clinics",
)
CARS = (
    "a Volvo estate", "a Toyota Corolla", "a Skoda Octavia", "a Honda Civic", "a Fiat Panda",
    "a Tesla Model 3", "a Subaru Outback", "a Mini Cooper", "a Kia Niro", "a Ford Focus",
    "a Renault Clio", "a Mazda MX-5", "a Volkswagen Golf", "a Nissan Leaf", "a Peugeot 208",
    "a Hyundai Ioniq", "a Citroen Berlingo", "a Dacia Duster",
)
PHONES = (
    "a Pixel 8", "an iPhone 15", "a Galaxy S23", "a Fairphone 5", "a Nokia G42", "an Xperia 10",
    "a OnePlus 12", "a Moto Edge", "a Nothing Phone", "a Galaxy A54", "an iPhone SE",
)
JOBS = (
    "nurse", "architect", "carpenter", "pharmacist", "pilot", "translator", "accountant",
    "electrician", "librarian", "chef", "vet", "physiotherapist", "geologist", "firefighter",
    "journalist", "plumber", "baker", "lawyer", "surveyor", "paramedic",
)
INSTRUMENTS = (
    "cello", "trumpet", "banjo", "drums", "saxophone", "flute", "ukulele", "harp", "accordion",
    "clarinet", "bass guitar", "oboe", "trombone", "mandolin",
)
PET_NAMES = (
    "Biscuit", "Pepper", "Mochi", "Juniper", "Rufus", "Clementine", "Pickles", "Nugget", "Olive",
    "Waffles", "Ziggy", "Maple", "Bean", "Luna", "Tofu", "Pumpkin", "Sprout", "Noodle", "Cosmo",
    "Dumpling", "Bramble", "Fig", "Toast", "Marzipan", "Pistachio", "Socks", "Truffle",
)
RESTAURANTS = (
    "Casa Lupo", "The Blue Heron", "Saffron House", "Nonna Rita's", "Golden Lantern",
    "The Copper Pot", "Kimchi Garden", "El Faro", "Little Lisbon", "Bistro Margaux",
    "The Hungry Fox", "Tandoor Junction", "Pho Saigon", "The Olive Branch", "Taqueria Sol",
    "Sushi Kaito",
)
STREETS = (
    "Elm Street", "Harbour Road", "Mill Lane", "Station Avenue", "Kings Parade", "Orchard Way",
    "Canal Street", "Victoria Road", "Chapel Row", "Market Square", "Linden Avenue",
    "Bridge Street", "Rosemary Lane", "Quarry Hill",
)
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
SUBJECTS = (
    "marine biology", "art history", "economics", "civil engineering", "philosophy",
    "linguistics", "astronomy", "nursing", "architecture", "statistics", "archaeology",
    "chemistry",
)
FOODS = ("peanuts", "shellfish", "kiwi", "sesame", "strawberries", "walnuts", "mustard",
         "celery", "soy", "hazelnuts", "mango", "buckwheat")
FEARS = ("spiders", "heights", "deep water", "thunderstorms", "clowns", "snakes", "flying",
         "crowds", "needles", "the dark")
COURSES = ("pottery", "woodworking", "salsa", "sign language", "first aid", "photography",
           "beekeeping", "watercolour", "sailing", "calligraphy", "bread baking", "welding")
MUSEUMS = ("the Museum of Flight", "the Natural History Museum", "the Design Museum",
           "the Maritime Museum", "the Railway Museum", "the Museum of Glass", "the Toy Museum",
           "the Science Museum", "the Textile Museum", "the Clock Museum", "the Map Museum")
BANDS = ("The Velvet Foxes", "Paper Lanterns", "Northern Static", "Moss and Marrow",
         "The Quiet Tides", "Glass Harbour", "Juniper Skies", "The Lemon Kites", "Copper Moth",
         "Saltwater Choir", "The Amber Owls")
ITEMS = ("a standing desk", "a rice cooker", "new hiking boots", "a record player",
         "a telescope", "an espresso machine", "a sewing machine", "a kayak", "a drone",
         "a tent", "a bread maker", "a pair of binoculars", "a rowing machine", "an air fryer")
SCHOOLS = ("Riverside", "Hillcrest", "St Anne's", "Oakfield", "Meadowbank", "Northgate",
           "Westbrook", "Ashcroft")
RELATIONS = (
    "sister", "brother", "mother", "father", "aunt", "uncle", "cousin", "grandmother",
    "grandfather", "niece", "nephew", "boss", "roommate", "neighbour", "colleague", "partner",
    "son", "daughter", "best friend", "coach", "landlord", "mentor",
)
# Relatives of a relative, for three-hop questions ("my boss's daughter").
SECOND_RELATIONS = ("daughter", "son", "husband", "wife", "best friend", "business partner")

# The adversarial suite asks about these; nothing else in a generated memory mentions them.
ABSENT_TOPICS = (
    ("horse", "What is my horse called?"),
    ("boat", "What is the name of my boat?"),
    ("tattoo", "What does my tattoo show?"),
    ("opera", "What is my favourite opera?"),
    ("skydiving", "When did I go skydiving?"),
    ("lottery", "What are my lottery numbers?"),
    ("chess", "Which chess club am I a member of?"),
    ("violin", "Who is my violin teacher?"),
    ("vineyard", "Which vineyard did I visit in France?"),
    ("blood", "What is my blood type?"),
    ("allotment", "Where is my allotment?"),
    ("pen pal", "Who is my pen pal in Chile?"),
    ("mortgage", "Which bank holds my mortgage?"),
    ("surfboard", "What colour is my surfboard?"),
)

# ---- English chit-chat ------------------------------------------------------------------------

FILLER_SLOTS = {
    "food": ("pasta", "curry", "tacos", "soup", "a salad", "pizza", "ramen", "stew", "dumplings",
             "a sandwich", "pancakes", "risotto", "noodles", "chili", "falafel"),
    "show": ("the baking show", "that detective series", "a nature documentary", "the quiz show",
             "an old sitcom", "the football highlights", "a space documentary", "the new drama"),
    "weather": ("rainy", "sunny", "freezing", "humid", "windy", "grey", "foggy", "mild", "stormy"),
    "chore": ("the laundry", "the dishes", "some vacuuming", "the grocery list", "the recycling",
              "the ironing", "the windows", "the fridge"),
    "feeling": ("tired", "pretty good", "a bit stressed", "relaxed", "restless", "cheerful",
                "sleepy", "distracted", "motivated"),
    "topic": ("the budget meeting", "a new podcast", "the traffic", "the football match",
              "the elections", "a crossword", "the office coffee", "the heating bill",
              "a funny video", "the neighbourhood gossip", "the train strike", "a board game"),
    "drink": ("tea", "coffee", "hot chocolate", "lemonade", "sparkling water", "herbal tea"),
    "sport": ("tennis", "football", "basketball", "cycling", "the rugby", "badminton",
              "the swimming"),
    "season": ("spring", "summer", "autumn", "winter"),
    "genre": ("jazz", "old rock", "podcasts", "audiobooks", "lo-fi beats", "classical music",
              "folk songs"),
    "count": ("two", "three", "four", "five", "a couple of", "several"),
}
USER_FILLER = (
    "It's so {weather} today, I barely left the house.",
    "I made {food} for dinner, turned out okay.",
    "Have you seen {show}? I watched a bit of it.",
    "Work was a lot today, I'm feeling {feeling}.",
    "I still need to do {chore} before the weekend.",
    "Everyone at the office was talking about {topic}.",
    "I'm having some {drink} and trying to relax.",
    "Did you catch {sport} on TV?",
    "I love {season}, it's my favourite time of year.",
    "Listening to {genre} while I tidy up.",
    "I spent {count} hours answering emails.",
    "Not much going on, just {chore} and {food}.",
    "The weather is {weather} again, typical.",
    "I think I'll skip the gym tonight, feeling {feeling}.",
    "Can you remind me to sort out {chore} later?",
    "That thing about {topic} was kind of funny.",
    "I'm craving {food} right now.",
    "Going to bed early, I'm {feeling}.",
    "What do you think about {topic}?",
    "I fell asleep during {show} again.",
    "My inbox is a mess, {count} meetings moved around.",
    "Any idea what to cook besides {food}?",
    "Long day. Just want some {drink} and quiet.",
    "I was thinking about planning something fun for {season}.",
    "Honestly {sport} was boring this time.",
    "I keep forgetting about {chore}.",
    "Is it weird that I enjoy {genre} this much?",
    "Quick update: nothing new, still {feeling}.",
    "Let's talk about something else, {topic} is exhausting.",
    "Weekend plans: {chore}, {food}, maybe {show}.",
    "Today felt {weather} in every sense.",
    "I tried a new recipe for {food}, not bad.",
    "Remind me what we said about {topic}?",
    "Had {count} cups of {drink} already, oops.",
    "I'm done with {chore} for today.",
)
ASSISTANT_FILLER = (
    "That sounds nice. How are you feeling about it?",
    "Got it. Anything else on your mind today?",
    "Sorry to hear you're {feeling}. Want some tips to unwind?",
    "{food} sounds great. Did you try a new recipe?",
    "I can help you plan {chore} if you like.",
    "A {weather} day is perfect for staying in with some {drink}.",
    "Happy to chat about {topic} whenever you want.",
    "Good call. Rest is important.",
    "I hear {show} has a loyal following.",
    "Sure, I can keep that in mind.",
    "That makes sense. Tell me more?",
    "Nice! {genre} is a good choice for tidying.",
    "Sounds like a busy day. Take it easy tonight.",
    "Understood. Let me know how it goes.",
    "Interesting take on {topic}.",
    "Would a short walk help with feeling {feeling}?",
    "I'm here if you want to talk it through.",
    "That's a classic {season} plan.",
    "Okay, noted for later.",
    "Ha, {sport} can be like that.",
)
# Sentences that name a planted fact's topic without stating any fact (harder difficulties use
# them, so a topic word alone does not find the evidence).
ECHO_FILLER = (
    "Random thought: {noun} prices are wild these days.",
    "There was a long thread about {noun} stuff online.",
    "Someone at work would not stop talking about {noun} topics.",
    "I read a short article on {noun} trends this morning.",
    "Do people still argue about {noun} things?",
    "My feed is full of {noun} jokes today.",
)
ECHO_NOUNS = (
    "dentist", "locker", "passport", "birthday", "anniversary", "restaurant", "gym", "landlord",
    "piano", "tortoise", "shoe", "car", "phone", "job", "city", "doctor", "puppy", "dog",
    "university", "marathon", "allergy", "instrument", "parrot", "concert", "museum", "lunch",
    "trip", "course", "school", "flat", "bike", "holiday",
)
# Chatter around a planted fact at the hard difficulty, so the fact sits in a longer message.
WRAP_BEFORE = ("Ugh, the train was late again.", "Okay so, random update.",
               "Before I forget, something else.", "Busy week, but anyway.",
               "Sorry, got distracted by {topic}.")
WRAP_AFTER = ("Anyway, how was your day?", "Then I made {food}, so that was nice.",
              "Not a big deal, just saying.", "Also the weather is {weather} again.",
              "We should talk about {topic} later.")

# ---- other languages --------------------------------------------------------------------------
# Chit-chat per language, used as filler when a run includes the multilingual suite.
FOREIGN_FILLER = {
    "zh": ("今天天气真好。", "我最近工作很忙。", "周末我们去公园散步了。", "这部电影很好看。",
           "晚饭吃了饺子。", "明天要开会。", "我在学做菜。", "最近睡得不太好。", "下班后去超市买菜。",
           "这个星期过得很快。"),
    "ja": ("今日はいい天気ですね。", "仕事が忙しいです。", "週末は家でゆっくりしました。",
           "晩ご飯はカレーでした。", "新しいドラマを見ています。", "駅まで歩きました。",
           "コーヒーを飲みながら本を読みました。", "明日は雨が降るそうです。"),
    "ko": ("오늘 날씨가 정말 좋네요.", "요즘 일이 너무 바빠요.", "주말에 영화를 봤어요.",
           "저녁은 뭐 먹을까요?", "어제 늦게 잤어요.", "커피 한 잔 하고 싶어요.",
           "퇴근하고 운동했어요.", "이번 주는 정말 길었어요."),
    "ru": ("Сегодня отличная погода.", "На работе много дел.", "Вечером смотрели новый фильм.",
           "Выходные провели за городом.", "Завтра обещают дождь.", "Надо купить хлеб и молоко.",
           "Неделя пролетела незаметно.", "Устал, пойду спать пораньше."),
    "ar": ("الجو جميل اليوم.", "كان يوم العمل طويلاً.", "شاهدنا فيلماً جديداً.",
           "سأذهب إلى السوق غداً.", "أحب القهوة في الصباح.", "عطلة نهاية الأسبوع كانت هادئة.",
           "الطريق كان مزدحماً جداً.", "نسيت مظلتي في المكتب."),
    "latin": ("Il fait très beau aujourd'hui.", "Heute war ein langer Tag im Büro.",
              "Mañana tengo una reunión temprano.", "Hoje o trânsito estava horrível.",
              "On a mangé une crêpe au café.", "Wir haben am Wochenende Kuchen gebacken.",
              "La película de anoche fue muy divertida.", "Está a chover outra vez."),
}
# Languages written without spaces: chatter around a fact is joined without one.
NO_SPACE_LANGUAGES = ("zh", "ja")

# ---- two people talking (the speakers suite) --------------------------------------------------
# (name, pronoun, short name): the people of a two-person chat. Half are common words (a reader
# of "Will", "May", "Hope" cannot tell the name from the word), some go by a short name that
# begins the full one ("Mel" for "Melanie"), which questions never use.
SPEAKER_PEOPLE = (
    ("Will", "he", ""), ("May", "she", ""), ("Grace", "she", ""), ("Hope", "she", ""),
    ("Rose", "she", ""), ("Joy", "she", ""), ("Mark", "he", ""), ("Frank", "he", ""),
    ("Bill", "he", ""), ("Drew", "he", ""), ("Summer", "she", ""), ("Ray", "he", ""),
    ("Melanie", "she", "Mel"), ("Jonathan", "he", "Jon"), ("Jessica", "she", "Jess"),
    ("Timothy", "he", "Tim"), ("Deborah", "she", "Deb"), ("Alexander", "he", "Alex"),
    ("Caroline", "she", ""), ("Nate", "he", ""), ("Priya", "she", ""), ("Tomas", "he", ""),
)
# How one side calls the other by name, as LoCoMo's speakers do: a greeting or an interjection
# opening the turn, the name opening it, a clause-final vocative, thanks and goodbyes. {n}: the
# name; {t}: the turn; {l}: the turn in mid-sentence form; {b}: the turn without its final stop,
# {e}: that stop.
ADDRESS_FORMS = (
    "Hey {n}! {t}", "Hi {n}, {l}", "Hello {n}! {t}", "Good morning {n}! {t}", "Hey {n}, {l}",
    "{n}, {l}", "Oh {n}, {l}", "Wow, {n}! {t}", "{b}, {n}{e}", "{t} Thanks, {n}.",
    "Thanks {n}! {t}", "{t} See you soon, {n}!", "{t} Talk soon, {n}.",
)
