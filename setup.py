"""Packaging for ugttt: every setting lives in settings.ini (the nbdev 2 layout); edit there, not here."""
from configparser import ConfigParser
import shlex
import setuptools

config = ConfigParser(delimiters=['='])
config.read('settings.ini', encoding='utf-8')
cfg = config['DEFAULT']

expected = 'version description keywords author author_email lib_name user license status min_python audience language'.split()
for o in expected: assert o in cfg, f"settings.ini is missing the setting {o!r}"

statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive']
py_versions = '3.11 3.12 3.13'.split()
requirements = shlex.split(cfg.get('requirements', ''))
dev_requirements = shlex.split(cfg.get('dev_requirements', ''))
# optional extras: settings.ini's `extras_<name> = ...` lines become `pip install ugttt[<name>]`; `all` is their union
extras = {k[len('extras_'):]: shlex.split(v) for k, v in cfg.items() if k.startswith('extras_')}
extras['all'] = sorted({r for rs in extras.values() for r in rs})

setuptools.setup(
    name=cfg['lib_name'],
    version=cfg['version'],
    description=cfg['description'],
    keywords=cfg['keywords'],
    author=cfg['author'],
    author_email=cfg['author_email'],
    license='Apache Software License 2.0',
    classifiers=['Development Status :: ' + statuses[int(cfg['status'])],
                 'Intended Audience :: ' + cfg['audience'].title(),
                 'Natural Language :: ' + cfg['language'].title(),
                 'License :: OSI Approved :: Apache Software License']
                + ['Programming Language :: Python :: ' + v for v in py_versions[py_versions.index(cfg['min_python']):]],
    url=cfg['git_url'],
    packages=setuptools.find_packages(include=['ugttt', 'ugttt.*']),
    include_package_data=True,
    # the embedded default model (weights, tokenizer, config) ships as package data
    package_data={'ugttt': ['assets/*', 'assets/*/*', 'assets/*/*/*', 'tasks/templates/*/*']},
    install_requires=requirements,
    extras_require={'dev': dev_requirements, **extras},
    python_requires='>=' + cfg['min_python'],
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    zip_safe=False,
    entry_points={'console_scripts': shlex.split(cfg.get('console_scripts', '')),
                  'nbdev': [f'{cfg.get("lib_path")}={cfg.get("lib_path")}._modidx:d']},
)
