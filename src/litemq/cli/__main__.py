from litemq.cli.app import main

main()
