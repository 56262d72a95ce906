from testbed_app.cli import main

raise SystemExit(main())
