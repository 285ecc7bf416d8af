"""Physical constants and units of the toolkit, in one place.

Units everywhere: lengths in AU, times in years (yr), masses in solar masses (M_sun); so velocities are AU/yr,
accelerations AU/yr^2 and forces M_sun AU/yr^2. A leaf module: it imports nothing but ``math``.
"""

import math

G = 39.4784176044
"""Gravitational constant in AU^3 M_sun^-1 yr^-2: 4 pi^2 (39.47841760435743...) to 12 significant digits, the value
the reference (Vafa et al. 2025) simulates with. Every dataset is computed with exactly this number: changing its
last digits would change the bytes of every dataset."""

G_EXACT = 4 * math.pi**2
"""4 pi^2 AU^3 M_sun^-1 yr^-2 exactly: the G a discovered law's constant is judged against (``orbitlaw.discovery``),
1e-12 from :data:`G` in relative terms, far below any precision a verdict resolves."""

YEARS_PER_DAY = 0.0027
"""One day in years as the reference defines it (a true day is 1 / 365.25 = 0.0027379 yr): its time steps are
7 and 180 such days (``orbitlaw.orbits.tokenizer.TIME_STEPS``)."""

UNITS = {"length": "AU", "time": "yr", "mass": "M_sun", "velocity": "AU/yr", "force": "M_sun AU/yr^2", "G": G}
"""The units a dataset's manifest records (its ``units`` key)."""
