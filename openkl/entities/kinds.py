"""The type of an entity, from the evidence of its name and the words beside it.

Thirteen types (docs/entities.md): Person, Organization, Place, Event, Work, Software,
Method, Chemical, GeneProtein, Disease, Organism, Anatomy and Concept, plus Code (an
identifier in code) and Reference (a DOI, an arXiv id, a link). The extractor sets Person
and Organization from the shape of a name; this module reads what else a name says:

- its last word (the head: "breast *cancer*", "T *cells*", "*receptor*", "*therapy*");
- its morphology ("-itis", "-ase", "-graphy", "-mab", a gene symbol such as "BRCA1");
- a short list of well-known names (countries, formats and protocols, organizations);
- the word after it ("CD4 *expression*", "the dpkg *command*");
- what the passage is about: biomedical text makes "CDK1" a gene, technical text makes
  "PDP-10" or "libfoo" a product.

Each rule is evidence; with none, the type stays Concept.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .lexicon import _words

TYPES = (
    "Person",
    "Organization",
    "Place",
    "Event",
    "Work",
    "Software",
    "Method",
    "Chemical",
    "GeneProtein",
    "Disease",
    "Organism",
    "Anatomy",
    "Concept",
    "Code",
    "Reference",
)

# -- what a passage is about -----------------------------------------------------------------
BIO_CUES = _words(
    "cell cells protein proteins gene genes expression patients patient mice mouse rats"
    " clinical disease tumor tumour cancer treatment therapy tissue blood serum plasma"
    " receptor receptors mrna dna rna mutation mutations enzyme kinase antibody in vivo"
    " vitro infection inflammation dose doses trial cohort mortality risk molecular"
    " signaling signalling pathway embryos embryo neurons brain liver species bacteria"
    " virus viral hormone insulin metabolism phenotype genome"
)
TECH_CUES = _words(
    "software file files command commands library libraries install installed package"
    " packages program programs code source compile compiler version versions debian"
    " linux unix system operating server client user users configuration config"
    " directory script scripts build binary binaries release releases kernel api"
    " computer computers machine machines hardware processor memory terminal shell"
    " protocol network internet web browser editor language programming documentation"
    " upstream maintainer repository git bug bugs patch option options daemon service"
)

# -- heads: the last word of a name says what kind of thing it is ----------------------------
HEAD_TYPES: dict[str, str] = {
    **dict.fromkeys(
        _words(
            "cancer cancers carcinoma carcinomas tumor tumors tumour tumours lymphoma"
            " lymphomas leukemia leukaemia sarcoma sarcomas melanoma melanomas glioma"
            " disease diseases syndrome syndromes disorder disorders infection infections"
            " injury injuries failure deficiency deficiencies diabetes hypertension obesity"
            " sepsis stroke fatigue pain asthma arthritis dementia depression fever"
            " fibrosis sclerosis thrombosis stenosis cirrhosis anemia anaemia malaria"
            " tuberculosis pneumonia influenza aids abnormality abnormalities defect"
            " defects lesion lesions toxicity insufficiency dysfunction inflammation"
            " palsy atrophy dystrophy hyperplasia neoplasm neoplasms metastasis"
            " metastases allergy ulcer ulcers malignancy malignancies flushes"
            " immunodeficiency carcinogenesis lymphomagenesis tumorigenesis"
        ),
        "Disease",
    ),
    **dict.fromkeys(
        _words(
            "therapy therapies radiotherapy chemotherapy immunotherapy imaging spectrometry"
            " spectroscopy microscopy chromatography electrophoresis assay assays"
            " sequencing pcr blot blotting staining regression surgery transplantation"
            " resection biopsy vaccination screening scan scans tomography ultrasound"
            " technique techniques procedure procedures algorithm algorithms method"
            " analysis immunohistochemistry cytometry transfection knockdown"
            " mutagenesis hybridization hybridisation cloning stimulation ablation"
            " intervention interventions simulation simulations design trial trials"
            " test sorting suppression administration transfusion dialysis"
            " anesthesia anaesthesia examination reaction inactivation assembly"
            " monitoring profiling knockout"
        ),
        "Method",
    ),
    **dict.fromkeys(
        _words(
            "protein proteins receptor receptors kinase kinases enzyme enzymes factor"
            " factors antibody antibodies integrin integrins cytokine cytokines gene genes"
            " mrna mrnas rna rnas channel channels transporter transporters ligand ligands"
            " subunit subunits isoform isoforms interleukin interferon chemokine chemokines"
            " hormone hormones peptide peptides allele alleles oncogene oncogenes"
            " protease phosphatase polymerase synthase ligase transferase reductase"
            " oxidase dehydrogenase microrna micrornas mirna antigen antigens domain"
            " complex histone histones myosin actin tubulin collagen insulin"
            " hemoglobin haemoglobin immunoglobulin"
        ),
        "GeneProtein",
    ),
    **dict.fromkeys(
        _words(
            "acid acids oxide oxides drug drugs compound compounds inhibitor inhibitors"
            " agonist agonists antagonist antagonists vitamin steroid steroids glucose"
            " cholesterol ethanol alcohol calcium sodium potassium iron zinc magnesium"
            " oxygen nitrogen carbon hydrogen lipid lipids metabolite metabolites"
            " molecule molecules salt salts toxin toxins nutrient nutrients"
            " dopamine serotonin cysteine glutamate cisplatin aspirin metformin"
            " statin statins opioid opioids antibiotic antibiotics vaccine vaccines"
        ),
        "Chemical",
    ),
    **dict.fromkeys(
        _words(
            "mouse mice rat rats zebrafish yeast bacteria bacterium virus viruses"
            " herpesvirus retrovirus phage species strain strains fly flies worm worms"
            " plant plants monkeys monkey primates macaque macaques pig pigs dog dogs"
            " chicken chickens frog frogs fungus fungi parasite parasites"
        ),
        "Organism",
    ),
    **dict.fromkeys(
        _words(
            "cell cells tissue tissues epithelium endothelium muscle muscles artery"
            " arteries vein veins tract tube cortex brain heart liver kidney kidneys lung"
            " lungs bone bones marrow blood plasma serum neuron neurons lymphocyte"
            " lymphocytes macrophage macrophages fibroblast fibroblasts organ organs gland"
            " glands mitochondria mitochondrion nucleus nuclei embryo embryos stereocilia"
            " cochlea retina skin vessel vessels ventricle ventricles hippocampus matter"
            " spleen thymus pancreas colon intestine stomach placenta trophoblast"
            " trophoblasts platelet platelets cortices membrane membranes axon axons"
            " synapse synapses line lines cord epidermis dermis cytoskeleton wall walls"
            " ganglion ganglia islet islets follicle follicles"
        ),
        "Anatomy",
    ),
    **dict.fromkeys(
        _words(
            "library libraries program programs command daemon editor compiler"
            " interpreter language protocol format toolkit framework package shell"
            " browser server client kernel driver utility utilities api database"
            " machine machines computer computers processor microprocessor terminal"
            " workstation minicomputer mainframe"
        ),
        "Software",
    ),
    **dict.fromkeys(
        _words(
            "university college institute institution laboratory laboratories labs"
            " foundation society association council committee company corporation"
            " inc ltd llc gmbh corp agency ministry department consortium federation"
            " organisation organization academy bank hospital commission union"
            " project group team board telecommunications microsystems labs press club"
            " observatory observatories museum school clinic"
        ),
        "Organization",
    ),
    **dict.fromkeys(
        _words(
            "street avenue road city county state states island islands river lake"
            " mountain mountains valley bay park square building province region"
        ),
        "Place",
    ),
    **dict.fromkeys(
        _words(
            "war conference symposium olympics games revolution crisis coup summit"
            " expo workshop election epidemic pandemic outbreak"
        ),
        "Event",
    ),
    **dict.fromkeys(
        _words(
            "journal transactions proceedings manual handbook dictionary book"
            " encyclopedia encyclopaedia magazine newspaper article paper thesis"
            " report license licence"
        ),
        "Work",
    ),
}
_BIO = frozenset(["Disease", "Method", "GeneProtein", "Chemical", "Organism", "Anatomy"])
# heads that name a biological kind only in biomedical text ("command line", "test suite")
_AMBIGUOUS = _words(
    "line lines matter tube membrane membranes complex domain factor factors channel"
    " channels test design trial trials scan scans screening suppression administration"
    " failure defect defects lesion lesions stimulation examination sorting cell cells"
    " plant plants worm worms strain strains species simulation simulations"
    " intervention interventions analysis method technique techniques procedure wall walls"
    " reaction inactivation assembly monitoring profiling knockout"
    " procedures algorithm algorithms compound compounds salt salts vessel vessels"
    " tract organ organs"
)

# -- morphology ------------------------------------------------------------------------------
_DISEASE_END = re.compile(
    r"(?:itis|omas?|aemia|emia|pathy|plasia|algia|uria|penia|osis|iasis|ism)$"
)
_NOT_DISEASE = _words(
    "apoptosis mitosis meiosis diagnosis prognosis hypnosis osmosis symbiosis necrosis"
    " endocytosis exocytosis phagocytosis analysis synthesis genesis morphogenesis"
    " hypothesis basis thesis emphasis homeostasis chemotaxis mechanism organism"
    " metabolism magnetism mechanism criticism realism aroma diploma stoma genome"
    " chromosome ribosome proteome coma"
)
_METHOD_END = re.compile(r"(?:graphy|scopy|metry|ectomy|otomy|ostomy|plasty|therapy)$")
_ENZYME_END = re.compile(r"[a-z]{3,}ases?$")
_DRUG_END = re.compile(
    r"(?:mab|tinib|platin|mycin|cillin|azole|statin|pril|sartan|olol|prazole|vir|cycline"
    r"|floxacin|tide|uracil|amine|amide|azine|idine|oxacin|dronate|parin|profen|caine"
    r"|barbital|azepam|dipine|setron|triptan|lukast|gliflozin|gliptin|formin)$"
)
_CHEM_END = re.compile(r"(?:ine|ide|ate|ol|one|ose|ene|yl|ium)$")
_NOT_CHEM = _words(
    "line online machine engine routine discipline medicine vaccine cuisine doctrine"
    " guide side wide tide bride ride inside outside nucleotide peptide"
    " state rate date late gate estimate template update candidate climate"
    " mandate debate ultimate substrate primate"
    " control protocol school pool tool symbol patrol"
    " one done none phone zone bone tone gone someone anyone everyone"
    " close dose purpose nose hose rose pose"
    " gene scene scheme"
)
# a gene or protein symbol: BRCA1, CDK1, IL-6, ET-1, p53, TNF-α, Dvl2, CD4
_GENE = re.compile(
    r"^(?:[A-Z][A-Za-z]{0,7}\d{1,3}[A-Za-z]?(?:[/-]\w{1,3})?|[A-Z]{2,6}-\d{1,3}[a-z]?"
    r"|p\d{2,3}|[A-Z]{2,5}-[αβγδκ]|[A-Z]{2,5}[αβγδκ])$"
)
_GREEK = _words("alpha beta gamma delta kappa epsilon α β γ δ κ")
_ROMAN = re.compile(r"^(?:i{1,3}|iv|v|vi{1,3}|ix|x)$")
_POSSESSIVE = re.compile(r"['’]s$")
_TAXON_END = re.compile(r"[a-z]{3,}(?:aceae|ales|idae|inae|phyta|mycota)$")
_VERSIONISH = re.compile(r"^v?\d+(?:\.\d+)+[a-z]?$|^[A-Z]{1,3}-?\d{1,4}[A-Z]?$")
_BINOMIAL = re.compile(r"^[A-Z][a-z]+ [a-z]{3,}$|^[A-Z]\. [a-z]{3,}$")

# -- names everyone knows --------------------------------------------------------------------
PLACES = _words(
    "africa america asia europe australia antarctica arctic atlantic pacific"
    " afghanistan albania algeria argentina armenia austria bangladesh belgium bolivia"
    " brazil bulgaria cambodia cameroon canada chile china colombia croatia cuba"
    " czechia denmark ecuador egypt estonia ethiopia finland france georgia germany"
    " ghana greece guatemala haiti honduras hungary iceland india indonesia iran iraq"
    " ireland israel italy jamaica japan jordan kazakhstan kenya korea kuwait latvia"
    " lebanon libya lithuania luxembourg madagascar malawi malaysia mali malta mexico"
    " mongolia morocco mozambique myanmar nepal netherlands holland nicaragua niger"
    " nigeria norway pakistan panama paraguay peru philippines poland portugal qatar"
    " romania russia rwanda scotland senegal serbia singapore slovakia slovenia"
    " somalia spain sudan sweden switzerland syria taiwan tanzania thailand tunisia"
    " turkey uganda ukraine uruguay uzbekistan venezuela vietnam wales yemen zambia"
    " zimbabwe england britain uk usa ussr"
    " alabama alaska arizona arkansas california colorado connecticut delaware florida"
    " hawaii idaho illinois indiana iowa kansas kentucky louisiana maine maryland"
    " massachusetts michigan minnesota mississippi missouri montana nebraska nevada"
    " ohio oklahoma oregon pennsylvania tennessee texas utah vermont virginia"
    " washington wisconsin wyoming"
    " london paris berlin rome madrid moscow tokyo beijing shanghai delhi mumbai"
    " cambridge oxford boston chicago seattle houston atlanta dallas denver phoenix"
    " philadelphia pittsburgh baltimore detroit"
    " manchester edinburgh glasgow dublin amsterdam brussels vienna prague warsaw"
    " stockholm oslo copenhagen helsinki geneva zurich munich hamburg milan"
    " barcelona lisbon athens istanbul cairo jerusalem sydney melbourne toronto"
    " montreal vancouver ottawa ames iowa urbana champaign"
    " mars venus jupiter saturn mercury earth moon"
)
PLACE_NAMES = frozenset(
    [
        "new york",
        "new jersey",
        "new mexico",
        "new hampshire",
        "new zealand",
        "south africa",
        "north america",
        "south america",
        "latin america",
        "united states",
        "united kingdom",
        "soviet union",
        "hong kong",
        "silicon valley",
        "los angeles",
        "san francisco",
        "san diego",
        "palo alto",
        "menlo park",
        "murray hill",
        "north carolina",
        "south carolina",
        "north dakota",
        "south dakota",
        "west virginia",
        "rhode island",
        "saudi arabia",
        "sri lanka",
        "costa rica",
        "puerto rico",
        "el salvador",
        "united states of america",
        "great britain",
        "kwazulu natal",
    ]
)
ORGANIZATIONS = _words(
    "ibm dec mit cern arpa darpa nasa nsf nih who fda cdc ieee acm ietf w3c iso ansi fsf"
    " xerox microsoft apple google intel amd motorola nokia oracle hp compaq"
    " netscape mozilla canonical novell sgi nvidia samsung sony toshiba fujitsu"
    " siemens ericsson bbn rand att at&t mci worldcom verizon cisco ericsson"
    " unesco unicef nato oecd imf opec eu un stanford berkeley princeton harvard yale"
    " caltech ucla cmu compuserve"
)
# formats, protocols, languages and standards known by their letters
SOFTWARE = _words(
    "json xml html xhtml http https ftp ssh tls ssl dns tcp udp smtp imap pop3 ldap"
    " sql pdf csv yaml toml ascii unicode utf-8 utf-16 posix x11 svg png jpeg gif"
    " mp3 tcp/ip ip ipv4 ipv6 nfs usb pci scsi sata bios uefi ethernet wifi bluetooth"
    " c c++ java javascript python perl ruby php lisp fortran cobol pascal basic ada"
    " haskell rust tcl sh bash emacs vi vim gcc glibc linux unix windows macos"
    " debian ubuntu fedora freebsd openbsd netbsd solaris multics tenex tops-20"
    " git svn cvs make cmake autotools systemd dpkg apt rpm openssl gnupg gpg"
    " postgresql mysql sqlite kerberos openssh x.509 asn.1 ssh-keygen arpanet internet"
    " usenet unicode markdown latex tex troff groff nroff sphinx doxygen valgrind"
)
ORGANISMS = _words(
    "drosophila arabidopsis caenorhabditis saccharomyces escherichia xenopus zebrafish"
    " murine mouse mice rat rats yeast human humans hiv hiv-1 kshv ebv hpv hcv hbv"
)
METHODS = _words(
    "pcr mri fmri ct pet ecg eeg elisa rt-pcr qpcr crispr rnai sirna shrna chip-seq"
    " rna-seq facs maldi dti dwi"
)

# the word after a name, and the type it gives: "CD4 expression", "the dpkg command"
NEXT_TYPES: dict[str, str] = {
    **dict.fromkeys(
        _words(
            "expression gene genes protein proteins mrna mrnas receptor receptors kinase"
            " activity activation signaling signalling knockout deletion mutant mutants"
            " mutation mutations transcripts transcript levels promoter inhibitor"
            " inhibitors inhibition antibody antibodies binding phosphorylation isoform"
            " isoforms family homolog homologs orthologs paralogs"
        ),
        "GeneProtein",
    ),
    **dict.fromkeys(
        _words(
            "patients treatment treatments therapy administration dose doses dosage"
            " exposure concentration concentrations infusion injection supplementation"
        ),
        "",  # means the name is a substance or a disease: decided by the name
    ),
    **dict.fromkeys(
        _words(
            "command commands package packages library program daemon utility tool"
            " binary binaries script module modules source release version versions"
            " file files format api interface server client repository implementation"
            " project's distribution installation"
        ),
        "Software",
    ),
}


def domain(words: set[str] | frozenset[str]) -> str:
    """ "bio", "tech" or "" from the lower-case words of a passage."""
    bio = len(words & BIO_CUES)
    tech = len(words & TECH_CUES)
    if bio >= 2 and bio > tech:
        return "bio"
    if tech >= 2 and tech > bio:
        return "tech"
    return ""


def kind_of(
    name: str,
    dom: str,
    nxt: str = "",
    rare: bool = False,
    is_rare: Callable[[str], bool] = lambda w: False,
) -> str | None:
    """The type a name's own evidence gives, or None when it gives none. `dom` is the
    passage's domain, `nxt` the lower-case word after the name, `rare` whether the name is
    a rare word (not in a general vocabulary), `is_rare` that test for any one word."""
    name = _POSSESSIVE.sub("", name.strip())
    low = name.lower()
    words = low.replace("-", " ").split()
    while len(words) > 1 and (words[-1] in _GREEK or _ROMAN.match(words[-1])):
        words.pop()  # "tumor necrosis factor-alpha", "World War II"
    if not words:
        return None
    raw_words = name.split()
    if len(raw_words) > 1 and _ROMAN.match(raw_words[-1].lower()):
        raw_words = raw_words[:-1]
    head = words[-1]
    head_raw = raw_words[-1] if raw_words else name
    if low in PLACE_NAMES or (len(words) == 1 and low in PLACES):
        return "Place"
    if len(words) == 1 and low in ORGANIZATIONS:
        return "Organization"
    if low in SOFTWARE:
        return "Software"
    if low in METHODS:
        return "Method"
    if _BINOMIAL.match(name) and dom == "bio":
        return "Organism"
    if len(words) == 1 and ("virus" in low or low in ORGANISMS or _TAXON_END.search(low)):
        return "Organism"
    if (
        words[0] in SOFTWARE
        and len(raw_words) > 1
        and all(w.islower() or _VERSIONISH.match(w) for w in raw_words[1:])
    ):
        return "Software"  # "git format-patch", "Debian 2.2", "Tk 8.6.13"
    if len(raw_words) > 1 and _VERSIONISH.match(raw_words[-1]) and raw_words[0][:1].isupper():
        return "Software"
    if _PERSONISH(raw_words, is_rare):
        return "Person"
    typ = HEAD_TYPES.get(head)
    if typ in _BIO and head in _AMBIGUOUS and dom != "bio":
        typ = None
    if typ in _BIO:
        return typ  # "prostate cancer", "T cells", "mass spectrometry", "sepsis"
    if typ and len(words) > 1:
        first = raw_words[0]
        named = head_raw[:1].isupper() or first[:1].isupper() or rare or not first.isalpha()
        # "Processor Trace Decoder Library", "libipt library", "MIT license"; "a packet
        # library" is a kind of software (Concept)
        return typ if named else None
    # morphology of the last word
    if head not in _NOT_DISEASE and _DISEASE_END.search(head) and len(head) > 5:
        return "Disease"
    if _METHOD_END.search(head) and len(head) > 6:
        return "Method"
    if head.endswith(("cyte", "cytes", "blast", "blasts")) and len(head) > 6:
        return "Anatomy"
    if head.endswith(("deficiency", "emia", "aemia")):
        return "Disease"
    if _ENZYME_END.search(head) and head not in ("base", "case", "phase", "release", "database"):
        return "GeneProtein"
    if _DRUG_END.search(head) and len(head) > 6 and head not in _NOT_CHEM:
        return "Chemical"
    single = len(raw_words) == 1
    if single and _GENE.match(name) and dom == "bio":
        return "GeneProtein"
    nt = NEXT_TYPES.get(nxt)
    if nt and (dom == "bio" or nt == "Software"):
        if nt == "GeneProtein" and dom == "bio":
            return nt
        if nt == "Software" and dom != "bio":
            return nt
    if dom == "bio" and head not in _NOT_CHEM and _CHEM_END.search(head) and rare:
        return "Chemical"
    if dom == "tech" and single and name.islower() and rare and not derived(low, is_rare):
        return "Software"
    if dom == "tech" and single and name.isupper() and name.isalpha() and len(name) >= 4 and rare:
        return "Software"  # "ENIAC", "HURD"
    if dom == "tech" and single and re.fullmatch(r"[A-Za-z]+[a-z][A-Z]\w*", name):
        return "Software"  # "iOS", "MingW", "NaCl"
    if dom == "tech" and single and re.search(r"[-_.+]|\d", name) and not name.isdigit():
        return "Software"
    return None


_PREFIXES = ("sub", "re", "un", "in", "im", "non", "over", "under", "omni", "multi", "inter")
_DERIVED_END = re.compile(r"(?:ities|ility|ity|ness|ations|ish)$")


def derived(word: str, is_rare: Callable[[str], bool]) -> bool:
    """An English word made from a common one ("subdirectories", "reloads", "omnipresent",
    "usability", "hackish"): rare in a vocabulary, yet no program's name."""
    if len(word) > 6 and _DERIVED_END.search(word):
        return True
    return any(
        word.startswith(p) and len(word) - len(p) >= 4 and not is_rare(word[len(p) :])
        for p in _PREFIXES
    )


_NOT_PERSON_WORD = _words(
    "los las san santa el la le new fort port saint st mount lake cape north south east"
    " west upper lower great little old"
)


def _PERSONISH(raw: list[str], is_rare: Callable[[str], bool]) -> bool:  # noqa: N802
    """ "Vinton G. Cerf", "Piet Beertema": two or three words in Title Case, each a rare
    word or an initial, none a word of places."""
    if not 2 <= len(raw) <= 4:
        return False
    names = [w for w in raw if not re.fullmatch(r"[A-Z]\.", w)]
    if len(names) < 2:
        return False
    return all(
        w[:1].isupper()
        and w[1:].islower()
        and w.isalpha()
        and w.lower() not in _NOT_PERSON_WORD
        and is_rare(w)
        for w in names
    )
