"""Word lists the local extractor reads: section labels, generic words, and the cues its
types are assigned by. General English and general domain vocabulary only: none of it names
a thing of any particular document."""

from __future__ import annotations


def _words(s: str) -> frozenset[str]:
    return frozenset(s.split())


# the section labels of structured abstracts and reports ("BACKGROUND The …", "METHODS AND
# FINDINGS We …", "MAIN OUTCOME MEASURES"), lower case; a run of them in capitals at the
# start of a sentence is a label, never a name, and the word after it starts the sentence
SECTION_LABELS = frozenset(
    [
        *_words(
            "abstract aim aims background conclusion conclusions context design discussion"
            " evidence exposure exposures findings funding hypothesis importance interpretation"
            " intervention interventions introduction limitations measurements method methods"
            " methodology objective objectives observations outcome outcomes participants"
            " patients population purpose rationale relevance results sample setting settings"
            " significance subjects summary synopsis trial registration"
        ),
        "main outcome measures",
        "main outcome measure",
        "outcome measures",
        "main results",
        "main outcomes",
        "methods and findings",
        "methods and finding",
        "materials and methods",
        "patients and methods",
        "subjects and methods",
        "design and setting",
        "setting and participants",
        "design setting and participants",
        "measurements and main results",
        "principal findings",
        "general significance",
        "data sources",
        "data extraction",
        "data synthesis",
        "data collection and analysis",
        "study selection",
        "study design",
        "review methods",
        "search methods",
        "search strategy",
        "selection criteria",
        "eligibility criteria",
        "authors conclusions",
        "key findings",
        "scope of review",
        "major conclusions",
        "methods and results",
        "results and conclusions",
        "evidence acquisition",
        "evidence synthesis",
        "clinical relevance",
        "level of evidence",
        "trial registration",
        "study objective",
        "main exposure",
        "main exposures",
        "case presentation",
    ]
)

# the words of a document's own headings that name its parts, not a thing ("Overview",
# "Installation", "Contents"): stripped from a name in a heading ("KSBA Overview" → KSBA)
HEADING_WORDS = _words(
    "overview introduction installation install installing usage contents content table"
    " readme notes note preface highlights requirements prerequisites building build"
    " configuration configuring setup summary changes changelog news faq examples example"
    " documentation docs download downloads license licensing copyright authors credits"
    " thanks acknowledgements acknowledgments history bugs reporting support contact"
    " contributing features description details options synopsis background references"
    " appendix index chapter section part release releases status compiling testing tests"
    " location locations usage upgrading upgrade quickstart getting started tutorial"
    " optional samples sample web links"
)

# adjectives that judge, hedge or place in time rather than name a kind: never the first
# word of a term ("profound impact", "striking differences", "modest frontloading")
EVALUATIVE = _words(
    "profound striking modest excellent significant insignificant important critical crucial"
    " essential severe mild moderate normal abnormal alternative potential novel "
    " relative overall present previous prior subsequent remarkable substantial"
    " considerable dramatic marked notable major minor strong weak robust reliable"
    " valid appropriate adequate optimal suitable effective efficient ineffective"
    " beneficial harmful adverse positive negative increased decreased reduced elevated"
    " improved enhanced higher lower greater lesser better worse poor"
    " good bad great excellent complete incomplete partial full direct indirect"
    " independent dependent consistent inconsistent comparable favourable favorable"
    " unfavourable unfavorable clear unclear obvious evident apparent likely unlikely"
    " possible probable certain uncertain unknown known unique distinct distinctive"
    " fundamental basic key main principal predominant dominant"
    " relevant irrelevant interesting intriguing surprising unexpected expected"
    " unprecedented exceptional extraordinary ordinary typical atypical usual unusual"
    " broad narrow wide extensive intensive comprehensive detailed systematic simple"
    " complicated sophisticated elaborate precise accurate exact rough"
    " approximate annual daily weekly monthly yearly recent current early late initial"
    " final ultimate additional further extra various numerous several many"
    " few different similar identical equivalent corresponding respective specific"
    " particular general overall whole entire new old legendary famous infamous"
    " traumatic tragic ironic funny hungry stodgy staunch galled beleaguered credulous"
    " fictitious genuine trustworthy negligible immediate internal external"
)

# nouns too general to be a term on their own or with one modifier ("present study",
# "short-term group", "data suggest"): the vocabulary of reporting, not of a field
GENERIC_NOUNS = _words(
    "analysis analyses finding findings group groups method methods data study studies"
    " patient patients participant participants subject subjects effect effects increase"
    " increases decrease decreases role roles evidence mechanism mechanisms approach"
    " approaches outcome outcomes association associations difference differences change"
    " changes investigation investigations observation observations insight insights"
    " ability abilities impact impacts importance hypothesis hypotheses implication"
    " implications aspect aspects feature features purpose aim aims goal goals objective"
    " objectives strategy strategies assumption assumptions consequence consequences"
    " investment investments cost costs saving savings benefit benefits guideline"
    " guidelines component components member members team teams "
    " site sites source sources record records account accounts decision decisions"
    " information instructions instruction support details detail people person someone"
    " individuals individual cohort cohorts population populations sample samples"
    " subset subsets majority minority proportion proportions range ranges"
    " value values degree degrees extent amount amounts quantity quantities total"
    " totals measure measures measurement measurements estimate estimates report reports"
    " paper papers article articles work works researchers"
    " author authors contributor contributors user users developer developers"
    " maintainer maintainers version versions release releases update updates"
    " issue issues bug bugs fix fixes option options setting settings default defaults"
    " directory directories file files command commands package packages"
    " tool tools program programs "
)

# verbs of scientific and technical writing, added to the extractor's own list: their
# inflected forms end a noun phrase ("cilengitide classifies", "data suggest")
MORE_VERBS = _words(
    "mediate regulate inhibit induce enhance impair coordinate invade stabilize destabilize"
    " depolymerize polymerize classify discuss summarize upgrade assess investigate observe"
    " confirm exhibit possess undergo facilitate correlate activate suppress attenuate"
    " abolish alter elicit evoke confer exert acquire adjust administer alleviate amplify"
    " analyse assemble characterize characterise cleave conclude conduct constitute"
    " deplete deteriorate diminish disrupt elevate eliminate elucidate emerge encounter"
    " engage enroll evolve exacerbate exceed exclude highlight hypothesize illustrate imply"
    " incorporate infect inhabit interact interfere isolate mimic modulate necessitate"
    " overcome overexpress participate persist phosphorylate precede predispose proliferate"
    " prolong quantify randomize randomise recruit reinforce relate render replicate"
    " resemble reside restrict retain reverse sensitize simulate stimulate strengthen"
    " surround sustain synthesize terminate transcribe transduce translocate underlie"
    " undermine utilize vary weaken widen worsen broke bungle condemn elbow propound"
    " summarise capture describe invalidate appoint rejoin join"
)

# nouns in -ing that name a technique or a process, not a participle ("cells signalling")
ING_NOUNS = _words(
    "signaling signalling sequencing imaging screening processing programming computing"
    " engineering training learning modeling modelling building staining labeling"
    " labelling blotting cloning editing splicing folding packaging scheduling networking"
    " hashing caching logging testing debugging rendering routing mapping typing"
    " binding pricing smoking drinking feeding"
)
