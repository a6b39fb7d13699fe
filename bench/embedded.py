"""Issue #20's name for bench/embedded_gunicorn.py (a view's latency while the embedded worker drains).

    ./dev bench embedded [same options as ./dev bench embedded_gunicorn]
"""

from embedded_gunicorn import main

if __name__ == "__main__":
    main()
